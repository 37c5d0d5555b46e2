"""chakra.sim.config: ASTRA-sim system JSON, network YAML and remote memory JSON files (reference §4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chakra.errors import ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE
from chakra.sim.collectives import collective_times
from chakra.sim.config import (
    NetworkConfig,
    RemoteMemoryConfig,
    load_network,
    load_remote_memory,
    load_system,
    parse_override,
    scale_network,
)

#: The example system file of reference §4.1 (keys of upstream ``Ring_4chunks.json``).
REFERENCE_SYSTEM: dict[str, Any] = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "boost-mode": 0,
    "roofline-enabled": 0,
    "peak-perf": 900,
}

#: The smallest system file ASTRA-sim can run: only the keys without a usable default.
MINIMAL_SYSTEM: dict[str, Any] = {
    "scheduling-policy": "FIFO",
    "preferred-dataset-splits": 1,
}

RING_8 = """\
topology: [ Ring ]
npus_count: [ 8 ]
bandwidth: [ 50.0 ]  # GB/s
latency: [ 500.0 ]   # ns
"""

SWITCH_RING = """\
topology: [ Switch, Ring ]
npus_count: [ 8, 4 ]
bandwidth: [ 400, 50 ]
latency: [ 936.25, 1000 ]
"""


def write_system(tmp_path: Path, config: dict[str, Any], name: str = "system.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config, indent=2))
    return path


def system_with(**changes: Any) -> dict[str, Any]:
    """The reference system file with keys (underscores for hyphens) changed; ``None`` removes a key."""
    config = dict(REFERENCE_SYSTEM)
    for name, value in changes.items():
        key = name.replace("_", "-")
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def write_network(tmp_path: Path, text: str, name: str = "network.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def input_error(call, *args, **kwargs) -> str:
    """The message of the ChakraInputError that ``call(*args, **kwargs)`` raises."""
    with pytest.raises(ChakraInputError) as info:
        call(*args, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# System JSON: values


def test_reference_example_system_file_loads_with_its_values(tmp_path):
    path = write_system(tmp_path, REFERENCE_SYSTEM)

    system = load_system(path)

    assert system.scheduling_policy == "LIFO"
    assert system.collective_optimization == "localBWAware"
    assert system.preferred_dataset_splits == 4
    assert system.active_chunks_per_dimension == 1
    assert system.endpoint_delay_ns == 10.0
    assert system.local_mem_bw_gbps == 1600.0
    assert system.peak_perf_tflops == 900.0
    assert (system.roofline_enabled, system.replay_only, system.trace_enabled) == (False, False, False)
    assert system.implementations == {
        "ALL_REDUCE": ("ring",),
        "ALL_GATHER": ("ring",),
        "REDUCE_SCATTER": ("ring",),
        "ALL_TO_ALL": ("ring",),
    }
    assert system.raw == REFERENCE_SYSTEM
    assert system.path == path


def test_optional_system_keys_take_astra_sim_defaults(tmp_path):
    system = load_system(write_system(tmp_path, MINIMAL_SYSTEM))

    assert system.active_chunks_per_dimension == 1
    assert system.endpoint_delay_ns == 10.0
    assert (system.local_mem_bw_gbps, system.peak_perf_tflops) == (0.0, 0.0)
    assert system.implementations == {}
    assert system.unknown_keys == ()


def test_unknown_system_keys_are_kept_in_raw_and_reported(tmp_path):
    system = load_system(write_system(tmp_path, {**MINIMAL_SYSTEM, "prefered-splits": 8, "my-note": "x"}))

    assert system.unknown_keys == ("prefered-splits", "my-note")
    assert system.raw["my-note"] == "x"


def test_documented_but_unparsed_keys_are_not_reported_as_unknown(tmp_path):
    system = load_system(write_system(tmp_path, REFERENCE_SYSTEM))  # has "boost-mode"

    assert system.unknown_keys == ()


def test_zero_local_mem_bw_is_kept_for_the_simulator_to_refuse_later(tmp_path):
    system = load_system(write_system(tmp_path, system_with(local_mem_bw=0)))

    assert system.local_mem_bw_gbps == 0.0


def test_direct_with_a_window_and_multi_dimension_lists_are_accepted(tmp_path):
    config = system_with(all_reduce_implementation=["direct8", "oneDirect4", "halvingDoubling"])

    system = load_system(write_system(tmp_path, config))

    assert system.implementations["ALL_REDUCE"] == ("direct8", "oneDirect4", "halvingDoubling")


def test_endpoint_delay_is_scaled_by_injection_scale_only_when_the_file_gives_it(tmp_path):
    given = load_system(write_system(tmp_path, system_with(endpoint_delay=20), "given.json"))
    default = load_system(write_system(tmp_path, MINIMAL_SYSTEM, "default.json"))

    assert given.scaled_endpoint_delay_ns(2.0) == 40.0
    assert default.scaled_endpoint_delay_ns(2.0) == 10.0


# ---------------------------------------------------------------------------------------------
# System JSON: errors


def test_a_system_file_without_collective_optimization_plans_one_dimension_as_baseline(tmp_path):
    # ASTRA-sim's custom-collective example has none: ASTRA-sim leaves it uninitialised, harmless there
    system = load_system(
        write_system(tmp_path, {**MINIMAL_SYSTEM, "all-reduce-implementation": ["ring"], "local-mem-bw": 50})
    )
    ring = NetworkConfig(("Ring",), (8,), (50.0,), (500.0,))

    assert system.collective_optimization is None
    assert collective_times(ALL_REDUCE, 1 << 20, None, system, ring).longest_ns > 0


def test_a_system_file_without_collective_optimization_cannot_plan_an_all_reduce_over_two_dimensions(tmp_path):
    system = load_system(
        write_system(tmp_path, {**MINIMAL_SYSTEM, "all-reduce-implementation": ["ring", "ring"], "local-mem-bw": 50})
    )
    two_d = NetworkConfig(("Ring", "Ring"), (2, 4), (50.0, 50.0), (500.0, 500.0))

    message = input_error(collective_times, ALL_REDUCE, 1 << 20, None, system, two_d)

    assert "collective-optimization" in message and "stalls" in message and str(system.path) in message


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("scheduling-policy", "uninitialised"),
        ("preferred-dataset-splits", "divide by zero"),
    ],
)
def test_a_missing_required_system_key_is_named_with_the_reason(tmp_path, key, why):
    path = write_system(tmp_path, {k: v for k, v in REFERENCE_SYSTEM.items() if k != key})

    message = input_error(load_system, path)

    assert str(path) in message
    assert repr(key) in message
    assert why in message
    assert f'add "{key}"' in message


def test_a_scheduling_policy_outside_the_set_names_the_value(tmp_path):
    message = input_error(load_system, write_system(tmp_path, system_with(scheduling_policy="RANDOM")))

    assert "scheduling-policy = 'RANDOM'" in message
    assert "LIFO, FIFO, EXPLICIT" in message


def test_an_enum_in_the_wrong_case_is_refused_with_the_exact_spelling(tmp_path):
    message = input_error(load_system, write_system(tmp_path, system_with(collective_optimization="localbwaware")))

    assert "'localbwaware'" in message
    assert 'write "localBWAware"' in message


@pytest.mark.parametrize("splits", [0, -2])
def test_non_positive_dataset_splits_are_refused(tmp_path, splits):
    message = input_error(load_system, write_system(tmp_path, system_with(preferred_dataset_splits=splits)))

    assert f"preferred-dataset-splits = {splits}" in message
    assert "must be > 0" in message


def test_fractional_dataset_splits_are_refused_rather_than_truncated(tmp_path):
    message = input_error(load_system, write_system(tmp_path, system_with(preferred_dataset_splits=2.5)))

    assert "preferred-dataset-splits = 2.5 is not a whole number" in message


def test_zero_active_chunks_per_dimension_is_refused(tmp_path):
    message = input_error(load_system, write_system(tmp_path, system_with(active_chunks_per_dimension=0)))

    assert "active-chunks-per-dimension = 0" in message


def test_an_unknown_algorithm_names_the_key_the_dimension_and_the_value(tmp_path):
    config = system_with(all_gather_implementation=["ring", "halvingDubling"])

    message = input_error(load_system, write_system(tmp_path, config))

    assert "all-gather-implementation[1] (dimension 1) = 'halvingDubling'" in message
    assert 'did you mean "halvingDoubling"' in message


@pytest.mark.parametrize("name", ["direct0", "Direct", "RING", "oneDirectX"])
def test_misspelled_or_windowless_algorithm_names_are_refused(tmp_path, name):
    message = input_error(load_system, write_system(tmp_path, system_with(all_reduce_implementation=[name])))

    assert repr(name) in message


def test_an_algorithm_setting_must_be_a_list(tmp_path):
    message = input_error(load_system, write_system(tmp_path, system_with(all_to_all_implementation="ring")))

    assert "all-to-all-implementation = 'ring'" in message
    assert '["ring"]' in message


def test_a_non_numeric_local_mem_bw_names_the_value(tmp_path):
    message = input_error(load_system, write_system(tmp_path, system_with(local_mem_bw="fast")))

    assert "local-mem-bw = 'fast' is not a finite number" in message


def test_a_negative_endpoint_delay_is_refused(tmp_path):
    message = input_error(load_system, write_system(tmp_path, system_with(endpoint_delay=-1)))

    assert "endpoint-delay = -1 must be >= 0" in message


def test_json_booleans_are_read_as_0_or_1_flags_as_astra_sim_reads_them(tmp_path):
    system = load_system(write_system(tmp_path, system_with(replay_only=True, roofline_enabled=False)))

    assert system.replay_only and not system.roofline_enabled


@pytest.mark.parametrize("missing", ["peak-perf", "local-mem-bw"])
def test_roofline_without_peak_perf_or_local_mem_bw_is_contradictory(tmp_path, missing):
    config = system_with(roofline_enabled=1)
    config[missing] = 0

    message = input_error(load_system, write_system(tmp_path, config))

    assert f"roofline-enabled is 1 but {missing} is 0" in message


def test_roofline_with_an_absent_peak_perf_says_absent(tmp_path):
    message = input_error(load_system, write_system(tmp_path, system_with(roofline_enabled=1, peak_perf=None)))

    assert "peak-perf is absent" in message


def test_roofline_with_both_rates_loads(tmp_path):
    system = load_system(write_system(tmp_path, system_with(roofline_enabled=1)))

    assert system.roofline_enabled is True


def test_a_json_syntax_error_names_the_line_and_column(tmp_path):
    path = tmp_path / "system.json"
    path.write_text('{\n  "scheduling-policy": "LIFO",\n  "preferred-dataset-splits": 4,\n}\n')

    message = input_error(load_system, path)

    assert str(path) in message
    assert "not valid JSON" in message
    assert "line 4, column 1" in message
    assert "no trailing commas" in message


def test_a_system_file_that_is_not_an_object_is_refused(tmp_path):
    message = input_error(load_system, write_system(tmp_path, ["LIFO"]))  # type: ignore[arg-type]

    assert "must be a JSON object" in message


def test_a_missing_system_file_is_no_such_file(tmp_path):
    message = input_error(load_system, tmp_path / "absent.json")

    assert "no such system configuration file" in message
    assert "absent.json" in message


# ---------------------------------------------------------------------------------------------
# System JSON: overrides


def test_overrides_replace_values_before_checking(tmp_path):
    overrides = {"preferred-dataset-splits": 8, "scheduling-policy": "FIFO"}

    system = load_system(write_system(tmp_path, REFERENCE_SYSTEM), overrides)

    assert (system.preferred_dataset_splits, system.scheduling_policy) == (8, "FIFO")
    assert system.raw["preferred-dataset-splits"] == 8


def test_an_invalid_override_is_refused_naming_the_override(tmp_path):
    path = write_system(tmp_path, REFERENCE_SYSTEM)

    message = input_error(load_system, path, {"preferred-dataset-splits": 0})

    assert "preferred-dataset-splits = 0 (set by override) must be > 0" in message


def test_an_override_can_supply_a_key_the_file_lacks(tmp_path):
    path = write_system(tmp_path, system_with(preferred_dataset_splits=None))

    system = load_system(path, {"preferred-dataset-splits": 2})

    assert system.preferred_dataset_splits == 2


def test_an_override_of_a_key_astra_sim_does_not_read_is_refused_with_a_suggestion(tmp_path):
    message = input_error(load_system, write_system(tmp_path, REFERENCE_SYSTEM), {"prefered-dataset-splits": 8})

    assert "override 'prefered-dataset-splits'" in message
    assert 'did you mean "preferred-dataset-splits"' in message


# ---------------------------------------------------------------------------------------------
# SystemConfig.algorithms


def test_algorithms_returns_the_per_dimension_list(tmp_path):
    system = load_system(write_system(tmp_path, system_with(all_reduce_implementation=["ring", "direct"])))

    assert system.algorithms("ALL_REDUCE", dims=2) == ("ring", "direct")
    assert system.algorithms("ALL_REDUCE", dims=3) == ("ring", "direct")  # higher dimensions stay unused


def test_algorithms_for_a_collective_without_a_setting_names_the_missing_key(tmp_path):
    path = write_system(tmp_path, MINIMAL_SYSTEM)

    message = input_error(load_system(path).algorithms, "ALL_REDUCE", 2)

    assert str(path) in message
    assert "'all-reduce-implementation'" in message
    assert '"all-reduce-implementation": ["ring", "ring"]' in message


def test_algorithms_longer_than_the_network_has_dimensions_are_refused(tmp_path):
    system = load_system(write_system(tmp_path, system_with(reduce_scatter_implementation=["ring", "ring"])))

    message = input_error(system.algorithms, "REDUCE_SCATTER", 1)

    assert "reduce-scatter-implementation lists 2 algorithms" in message
    assert "the network has 1 dimension" in message


def test_algorithms_for_a_type_without_a_setting_in_astra_sim_is_refused(tmp_path):
    system = load_system(write_system(tmp_path, REFERENCE_SYSTEM))

    message = input_error(system.algorithms, "BROADCAST", 1)

    assert "no algorithm setting for BROADCAST" in message


# ---------------------------------------------------------------------------------------------
# Network YAML: values


def test_reference_one_dimensional_ring_loads_with_its_values(tmp_path):
    path = write_network(tmp_path, RING_8)

    network = load_network(path)

    assert network == NetworkConfig(("Ring",), (8,), (50.0,), (500.0,), path=path)
    assert (network.dims, network.num_npus) == (1, 8)


def test_reference_switch_plus_ring_network_loads_with_its_values(tmp_path):
    network = load_network(write_network(tmp_path, SWITCH_RING))

    assert network.topology == ("Switch", "Ring")
    assert network.npus_count == (8, 4)
    assert network.bandwidth_gbps == (400.0, 50.0)
    assert network.latency_ns == (936.25, 1000.0)
    assert (network.dims, network.num_npus) == (2, 32)


def test_bandwidth_is_converted_to_bytes_per_ns_the_gib_based_way():
    network = NetworkConfig(("Ring",), (8,), (50.0,), (500.0,))

    assert network.bandwidth_bytes_per_ns(0) == 50 * 2**30 / 1e9


def test_coordinates_vary_fastest_in_dimension_zero():
    network = NetworkConfig(("Switch", "Ring", "Ring"), (2, 3, 4), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0))

    assert network.coordinates(0) == (0, 0, 0)
    assert network.coordinates(1) == (1, 0, 0)
    assert network.coordinates(2) == (0, 1, 0)
    # id = a0 + n0·(a1 + n1·a2) = 1 + 2·(2 + 3·3) = 23
    assert network.coordinates(23) == (1, 2, 3)


def test_coordinates_of_an_npu_outside_the_network_are_refused():
    network = NetworkConfig(("Ring",), (8,), (50.0,), (500.0,))

    assert "NPU 8 is outside the network's 8 NPUs" in input_error(network.coordinates, 8)


def test_scalars_are_read_as_one_dimension(tmp_path):
    network = load_network(write_network(tmp_path, "topology: Ring\nnpus_count: 4\nbandwidth: 25\nlatency: 0\n"))

    assert network == NetworkConfig(("Ring",), (4,), (25.0,), (0.0,), path=network.path)


def test_topology_names_are_accepted_in_any_case_and_normalised(tmp_path):
    text = SWITCH_RING.replace("Switch, Ring", "switch, FULLYCONNECTED")

    network = load_network(write_network(tmp_path, text))

    assert network.topology == ("Switch", "FullyConnected")


def test_numbers_in_exponent_form_are_numbers(tmp_path):
    # PyYAML reads 1e3 as a string; ASTRA-sim's yaml-cpp reads it as a number
    network = load_network(write_network(tmp_path, RING_8.replace("50.0", "1e3")))

    assert network.bandwidth_gbps == (1000.0,)


# ---------------------------------------------------------------------------------------------
# Network YAML: errors


def test_lists_of_different_lengths_are_refused_with_each_length(tmp_path):
    text = SWITCH_RING.replace("bandwidth: [ 400, 50 ]", "bandwidth: [ 400 ]")

    message = input_error(load_network, write_network(tmp_path, text))

    assert "one entry per dimension" in message
    assert "topology 2, npus_count 2, bandwidth 1, latency 2" in message


def test_a_dimension_of_one_npu_names_the_key_and_the_dimension(tmp_path):
    message = input_error(load_network, write_network(tmp_path, SWITCH_RING.replace("[ 8, 4 ]", "[ 8, 1 ]")))

    assert "npus_count[1] (dimension 1) = 1" in message
    assert "must be > 1" in message


def test_a_single_dimension_of_one_npu_is_a_one_gpu_system(tmp_path):
    network = load_network(
        write_network(tmp_path, "topology: [ Ring ]\nnpus_count: [ 1 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    )

    assert network.num_npus == 1


def test_a_zero_bandwidth_names_the_key_and_the_dimension(tmp_path):
    message = input_error(load_network, write_network(tmp_path, SWITCH_RING.replace("[ 400, 50 ]", "[ 0, 50 ]")))

    assert "bandwidth[0] (dimension 0) = 0 must be > 0: a link of 0 GB/s" in message


def test_a_negative_latency_is_refused(tmp_path):
    message = input_error(load_network, write_network(tmp_path, RING_8.replace("500.0", "-1")))

    assert "latency[0] (dimension 0) = -1 must be >= 0: it is a link latency in ns" in message


def test_a_non_numeric_link_bandwidth_names_the_value(tmp_path):
    message = input_error(load_network, write_network(tmp_path, RING_8.replace("50.0", "fast")))

    assert "bandwidth[0] (dimension 0) = 'fast' is not a finite number" in message


def test_an_unknown_topology_names_the_value(tmp_path):
    message = input_error(load_network, write_network(tmp_path, RING_8.replace("Ring", "Torus")))

    assert "topology[0] (dimension 0) = 'Torus' is not one of Ring, FullyConnected, Switch" in message


def test_a_missing_network_key_is_named(tmp_path):
    text = "\n".join(line for line in RING_8.splitlines() if not line.startswith("latency"))

    message = input_error(load_network, write_network(tmp_path, text))

    assert "network configuration has no 'latency'" in message


def test_the_older_network_format_gets_a_hint_that_it_is_no_longer_read(tmp_path):
    message = input_error(load_network, write_network(tmp_path, "dimensions-count: 1\nunits-count: [ 8 ]\n"))

    assert "older format" in message


def test_a_yaml_syntax_error_names_the_line(tmp_path):
    path = write_network(tmp_path, "topology: [ Ring ]\nnpus_count: [ 8\nbandwidth: [ 50 ]\n")

    message = input_error(load_network, path)

    assert str(path) in message
    assert "not valid YAML" in message
    assert "line 3" in message


def test_an_empty_network_file_is_refused(tmp_path):
    assert "found an empty file" in input_error(load_network, write_network(tmp_path, ""))


def test_a_missing_network_file_is_no_such_file(tmp_path):
    assert "no such network configuration file" in input_error(load_network, tmp_path / "absent.yml")


# ---------------------------------------------------------------------------------------------
# Network YAML: overrides and what-if scaling


def test_network_overrides_replace_whole_keys(tmp_path):
    network = load_network(write_network(tmp_path, SWITCH_RING), {"bandwidth": [100, 25], "latency": [0, 0]})

    assert network.bandwidth_gbps == (100.0, 25.0)
    assert network.latency_ns == (0.0, 0.0)
    assert network.npus_count == (8, 4)  # keys not overridden keep the file's values


def test_network_overrides_are_checked_like_the_file(tmp_path):
    message = input_error(load_network, write_network(tmp_path, SWITCH_RING), {"bandwidth": [100]})

    assert "bandwidth 1" in message


def test_an_override_of_a_key_the_network_file_has_not_is_refused(tmp_path):
    message = input_error(load_network, write_network(tmp_path, RING_8), {"bandwith": [100]})

    assert 'did you mean "bandwidth"' in message


def test_scale_network_multiplies_bandwidths_and_latencies(tmp_path):
    network = load_network(write_network(tmp_path, SWITCH_RING))

    scaled = scale_network(network, bandwidth_scale=2.0, latency_scale=0.5)

    assert scaled.bandwidth_gbps == (800.0, 100.0)
    assert scaled.latency_ns == (468.125, 500.0)
    assert (scaled.topology, scaled.npus_count, scaled.path) == (network.topology, network.npus_count, network.path)
    assert network.bandwidth_gbps == (400.0, 50.0)  # the input is unchanged


def test_scale_network_with_default_scales_is_the_same_network():
    network = NetworkConfig(("Ring",), (8,), (50.0,), (500.0,))

    assert scale_network(network) == network


@pytest.mark.parametrize(("bandwidth_scale", "latency_scale"), [(0.0, 1.0), (-1.0, 1.0), (1.0, -0.5)])
def test_scale_network_refuses_scales_that_make_no_network(bandwidth_scale, latency_scale):
    network = NetworkConfig(("Ring",), (8,), (50.0,), (500.0,))

    with pytest.raises(ChakraInputError):
        scale_network(network, bandwidth_scale=bandwidth_scale, latency_scale=latency_scale)


# ---------------------------------------------------------------------------------------------
# Remote memory JSON


def test_no_remote_memory_file_means_no_memory_expansion():
    assert load_remote_memory(None) == RemoteMemoryConfig("NO_MEMORY_EXPANSION")


def test_a_per_node_remote_memory_file_loads_with_its_values(tmp_path):
    path = write_system(
        tmp_path,
        {
            "memory-type": "PER_NODE_MEMORY_EXPANSION",
            "remote-mem-latency": 1000,
            "remote-mem-bw": 50,
            "num-nodes": 2,
            "num-npus-per-node": 4,
        },
        "memory.json",
    )

    memory = load_remote_memory(path)

    assert memory == RemoteMemoryConfig("PER_NODE_MEMORY_EXPANSION", 1000.0, 50.0, 2, 4, path=path)


def test_per_node_remote_memory_without_a_node_shape_is_refused(tmp_path):
    path = write_system(tmp_path, {"memory-type": "PER_NODE_MEMORY_EXPANSION", "num-nodes": 2}, "memory.json")

    message = input_error(load_remote_memory, path)

    assert "'num-npus-per-node'" in message
    assert "divide by zero" in message


def test_an_unknown_memory_type_names_the_value(tmp_path):
    path = write_system(tmp_path, {"memory-type": "CXL"}, "memory.json")

    assert "memory-type = 'CXL' is not one of" in input_error(load_remote_memory, path)


def test_a_remote_memory_file_without_a_memory_type_is_refused(tmp_path):
    path = write_system(tmp_path, {"remote-mem-bw": 50}, "memory.json")

    assert "no 'memory-type'" in input_error(load_remote_memory, path)


# ---------------------------------------------------------------------------------------------
# parse_override


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("preferred-dataset-splits=8", ("preferred-dataset-splits", 8)),
        ("endpoint-delay=12.5", ("endpoint-delay", 12.5)),
        ("local-mem-bw=1e3", ("local-mem-bw", 1000.0)),
        ("bandwidth=[100,50]", ("bandwidth", [100, 50])),
        ("all-reduce-implementation=[ring, direct8]", ("all-reduce-implementation", ["ring", "direct8"])),
        ("scheduling-policy=FIFO", ("scheduling-policy", "FIFO")),
        (" latency = 0 ", ("latency", 0)),
    ],
)
def test_parse_override_reads_the_value_as_yaml(text, expected):
    assert parse_override(text) == expected


def test_parse_override_without_an_equals_sign_is_refused():
    message = input_error(parse_override, "preferred-dataset-splits")

    assert "is not key=value" in message
    assert "preferred-dataset-splits=8" in message


def test_parse_override_without_a_value_is_refused():
    assert "has no value" in input_error(parse_override, "bandwidth=")


def test_parse_override_with_an_unreadable_value_is_refused():
    assert "cannot read the value" in input_error(parse_override, "bandwidth=[100,")
