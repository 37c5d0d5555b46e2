"""chakra.generate.micro, ``chakra generate micro`` and the ``chakra_generator`` drop-in: every family
is written for every rank with ids from 0, carries what consumers read, validates and simulates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import assert_one_line_error
from helpers import run_cli as run

from chakra import io
from chakra.attrs import find_attr, get_attr
from chakra.errors import ChakraInputError
from chakra.generate import micro
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    MEM_LOAD_NODE,
    MEM_STORE_NODE,
    METADATA_NODE,
    CollectiveCommType,
    Node,
)
from chakra.sim.config import NetworkConfig, RemoteMemoryConfig, load_system
from chakra.sim.run import simulate_workload
from chakra.validate import ERROR, WARNING, validate_set
from chakra.workload import open_workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
SYSTEM = EXAMPLES / "system.json"
NUM_RANKS = 4  # small enough to simulate every family quickly, more than a pair
#: Network of the simulations: examples/astra/ring2.yml's links, NUM_RANKS NPUs.
LINK_GBPS, LINK_LATENCY_NS = 50.0, 500.0
#: Remote memory for the memory families (any expansion type works; values are arbitrary but non-zero).
REMOTE_MEMORY = RemoteMemoryConfig("PER_NPU_MEMORY_EXPANSION", latency_ns=100.0, bandwidth_bytes_per_ns=10.0)
#: Families that are half of a transfer: they match only together.
HALVES = ("one_comm_send_node", "one_comm_recv_node")
UPSTREAM_FAMILY_COUNT = 14


def _ring(num_npus: int) -> NetworkConfig:
    return NetworkConfig(("Ring",), (num_npus,), (LINK_GBPS,), (LINK_LATENCY_NS,))


def _simulate(prefix: Path, num_npus: int = NUM_RANKS, **overrides: object):
    return simulate_workload(prefix, load_system(SYSTEM, overrides), _ring(num_npus), remote_memory=REMOTE_MEMORY)


def _problems(findings) -> list[tuple[str, str]]:
    return [(f.code, f.message) for f in findings if f.severity in (ERROR, WARNING)]


def _nodes(path: Path) -> list[Node]:
    return io.read(path)[1]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, micro.WrittenMicroWorkload]:
    out = tmp_path_factory.mktemp("micro")
    return {w.workload.name: w for w in micro.generate(out, None, micro.MicroParams(num_npus=NUM_RANKS))}


# -- files and ids ----------------------------------------------------------------------------


def test_all_families_are_written_with_upstream_names_first(written):
    assert list(written) == list(micro.FAMILIES)
    assert len(micro.UPSTREAM_FAMILIES) == UPSTREAM_FAMILY_COUNT
    assert {"REDUCE", "GATHER", "SCATTER", "send_recv_pair", "send_recv_ring", "comp_chain"} <= set(written)


@pytest.mark.parametrize("family", list(micro.FAMILIES))
def test_every_family_has_a_file_per_rank(written, family: str):
    item = written[family]
    assert [p.name for p in item.paths] == [f"{family}.{rank}.et" for rank in range(NUM_RANKS)]
    assert all(p.exists() for p in item.paths)
    assert len(open_workload(item.prefix)) == NUM_RANKS


@pytest.mark.parametrize("family", list(micro.FAMILIES))
def test_node_ids_start_at_zero_in_every_file(written, family: str):
    for path in written[family].paths:
        metadata, nodes = io.read(path)
        assert metadata.version == io.FORMAT_VERSION
        assert [n.id for n in nodes] == list(range(len(nodes)))


def test_defaults_are_upstreams():
    params = micro.MicroParams()
    assert (params.num_npus, params.runtime_us, params.tensor_size_bytes, params.comm_size_bytes) == (
        64,
        5,
        1024,
        65536,
    )


def test_default_rank_count_writes_64_files(tmp_path: Path):
    (item,) = micro.generate(tmp_path, ["one_comp_node"])
    assert len(item.paths) == micro.DEFAULT_NUM_NPUS


# -- attributes -------------------------------------------------------------------------------


def _member(node: Node, name: str) -> str | None:
    attr = find_attr(node, name)
    return None if attr is None else attr.WhichOneof("value")


def test_every_node_is_a_device_op_written_as_bool(written):
    for item in written.values():
        for nodes in item.workload.ranks:
            for node in nodes:
                if node.type != METADATA_NODE:
                    assert _member(node, "is_cpu_op") == "bool_val" and get_attr(node, "is_cpu_op") is False


def test_compute_nodes_carry_duration_num_ops_and_tensor_size(written):
    for family in ("one_comp_node", "two_comp_nodes_independent", "two_comp_nodes_dependent", "comp_chain"):
        for node in _nodes(written[family].paths[0]):
            assert node.type == COMP_NODE and node.duration_micros == micro.DEFAULT_RUNTIME_US
            assert _member(node, "num_ops") == "int64_val" and get_attr(node, "num_ops") >= 1
            assert _member(node, "tensor_size") == "uint64_val"
            assert get_attr(node, "tensor_size") == micro.DEFAULT_TENSOR_SIZE_BYTES


@pytest.mark.parametrize(
    ("family", "node_type"),
    [("one_remote_mem_load_node", MEM_LOAD_NODE), ("one_remote_mem_store_node", MEM_STORE_NODE)],
)
def test_memory_nodes_carry_tensor_size(written, family: str, node_type: int):
    (node,) = _nodes(written[family].paths[0])
    assert node.type == node_type and _member(node, "tensor_size") == "uint64_val"
    assert get_attr(node, "tensor_size") == micro.DEFAULT_TENSOR_SIZE_BYTES


@pytest.mark.parametrize("family", micro.COLLECTIVE_FAMILIES)
def test_collectives_carry_type_and_size_as_int64(written, family: str):
    expected_size = micro.BARRIER_SIZE_BYTES if family == "BARRIER" else micro.DEFAULT_COMM_SIZE_BYTES
    for path in written[family].paths:
        (node,) = _nodes(path)
        assert node.type == COMM_COLL_NODE and node.name == family
        assert _member(node, "comm_type") == "int64_val" and _member(node, "comm_size") == "int64_val"
        assert get_attr(node, "comm_type") == CollectiveCommType.Value(family)
        assert get_attr(node, "comm_size") == expected_size


def test_broadcast_carries_the_duration_astra_sim_replays(written):
    (node,) = _nodes(written["BROADCAST"].paths[0])
    assert node.duration_micros == micro.DEFAULT_RUNTIME_US


def test_metadata_node_has_one_attribute_of_every_value_kind(written):
    (node,) = _nodes(written["one_metadata_node_all_types"].paths[0])
    members = micro.value_kind_members()
    assert len(members) == 30 and "bytes_list" in members and "sfixed64_val" in members
    assert node.type == METADATA_NODE
    assert [a.WhichOneof("value") for a in node.attr] == members
    assert [a.name for a in node.attr] == [m.removesuffix("_val") for m in members]
    lists = [a for a in node.attr if a.name.endswith("_list")]
    assert all(len(getattr(a, a.WhichOneof("value")).values) == 2 for a in lists)


def test_p2p_nodes_carry_peers_tags_and_sizes_as_int32(written):
    for rank, path in enumerate(written["send_recv_ring"].paths):
        send, recv = _nodes(path)
        assert send.type == COMM_SEND_NODE and recv.type == COMM_RECV_NODE
        for node in (send, recv):
            for name in ("comm_src", "comm_dst", "comm_tag"):
                assert _member(node, name) == "int32_val"
            assert _member(node, "comm_size") == "int64_val"
            assert get_attr(node, "comm_size") == micro.DEFAULT_COMM_SIZE_BYTES
        assert (get_attr(send, "comm_src"), get_attr(send, "comm_dst")) == (rank, (rank + 1) % NUM_RANKS)
        assert get_attr(send, "comm_tag") == rank
        assert (get_attr(recv, "comm_src"), get_attr(recv, "comm_dst")) == ((rank - 1) % NUM_RANKS, rank)
        assert get_attr(recv, "comm_tag") == (rank - 1) % NUM_RANKS


def test_comp_chain_is_a_chain_of_the_given_length():
    (nodes,) = micro.comp_chain(micro.MicroParams(num_npus=2, chain_length=5)).ranks[:1]
    assert [list(n.data_deps) for n in nodes] == [[], [0], [1], [2], [3]]


def test_two_dependent_nodes_depend_and_independent_ones_do_not(written):
    assert [list(n.data_deps) for n in _nodes(written["two_comp_nodes_dependent"].paths[0])] == [[], [0]]
    assert [list(n.data_deps) for n in _nodes(written["two_comp_nodes_independent"].paths[0])] == [[], []]


# -- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family",
    [
        f
        for f, spec in micro.FAMILIES.items()
        if spec.astra_sim not in (micro.ASTRA_REFUSES, micro.ASTRA_ABORTS) and f not in HALVES
    ],
)
def test_family_validates_clean_for_astra_sim(written, family: str):
    assert _problems(validate_set(open_workload(written[family].prefix, whole=True), target="astra-sim")) == []


@pytest.mark.parametrize("family", [f for f, spec in micro.FAMILIES.items() if spec.astra_sim == micro.ASTRA_ABORTS])
def test_the_metadata_family_is_clean_but_an_error_for_astra_sim(written, family: str):
    workload = open_workload(written[family].prefix, whole=True)
    assert _problems(validate_set(workload)) == []
    assert {code for code, _ in _problems(validate_set(workload, target="astra-sim"))} == {"astra-metadata-node"}


@pytest.mark.parametrize("family", [f for f, spec in micro.FAMILIES.items() if spec.astra_sim == micro.ASTRA_REFUSES])
def test_refused_family_is_clean_but_flagged_for_astra_sim(written, family: str):
    workload = open_workload(written[family].prefix, whole=True)
    assert _problems(validate_set(workload)) == []
    codes = {code for code, _ in _problems(validate_set(workload, target="astra-sim"))}
    assert codes == {"astra-unsupported-collective"}
    assert any("Unsupported collective comm type" in note for note in written[family].workload.notes)


def _merge_halves(written, out: Path) -> Path:
    """Rank r's send (one_comm_send_node) and receive (one_comm_recv_node) in one file, ids 0 and 1."""
    for rank in range(NUM_RANKS):
        (send,) = _nodes(written["one_comm_send_node"].paths[rank])
        (recv,) = _nodes(written["one_comm_recv_node"].paths[rank])
        recv.id = 1
        io.write(out / f"merged.{rank}.et", None, [send, recv])
    return out / "merged"


def test_send_and_recv_families_are_the_two_halves_of_the_ring(written, tmp_path: Path):
    prefix = _merge_halves(written, tmp_path)
    for rank in range(NUM_RANKS):
        assert _nodes(prefix.with_name(f"merged.{rank}.et")) == _nodes(written["send_recv_ring"].paths[rank])
    assert _problems(validate_set(open_workload(prefix, whole=True), target="astra-sim")) == []
    assert len(_simulate(prefix).ranks) == NUM_RANKS


@pytest.mark.parametrize("family", HALVES)
def test_each_half_alone_is_reported_unmatched(written, family: str):
    codes = {code for code, _ in _problems(validate_set(open_workload(written[family].prefix, whole=True)))}
    assert codes == {"unmatched-p2p"}


# -- simulation -------------------------------------------------------------------------------


@pytest.mark.parametrize("family", [f for f in micro.FAMILIES if f not in HALVES])
def test_family_simulates_to_completion(written, family: str):
    result = _simulate(written[family].prefix)
    assert sorted(result.ranks) == list(range(NUM_RANKS))
    if family != "one_metadata_node_all_types":  # METADATA nodes finish at once
        assert result.finish_ns > 0


def test_roofline_times_a_compute_node_like_its_duration(written):
    replay = _simulate(written["one_comp_node"].prefix)
    roofline = _simulate(written["one_comp_node"].prefix, **{"roofline-enabled": 1})
    assert roofline.finish_ns == replay.finish_ns == micro.DEFAULT_RUNTIME_US * 1000


@pytest.mark.parametrize("num_npus", [2, 3, 5])
def test_send_recv_pair_matches_for_even_and_odd_rank_counts(tmp_path: Path, num_npus: int):
    item = micro.write_micro_workload(tmp_path, micro.send_recv_pair(micro.MicroParams(num_npus=num_npus)))
    assert _problems(validate_set(open_workload(item.prefix, whole=True), target="astra-sim")) == []
    assert len(_simulate(item.prefix, num_npus).ranks) == num_npus


def test_send_recv_pair_even_rank_sends_to_the_next(written):
    (send,) = _nodes(written["send_recv_pair"].paths[2])
    (recv,) = _nodes(written["send_recv_pair"].paths[3])
    assert send.type == COMM_SEND_NODE and get_attr(send, "comm_dst") == 3
    assert recv.type == COMM_RECV_NODE and get_attr(recv, "comm_src") == 2


# -- sweeps and sizes -------------------------------------------------------------------------


def test_sweep_writes_one_workload_per_combination(tmp_path: Path):
    sizes, counts = [1 << 10, 1 << 20], [2, 4]
    written = micro.sweep_collectives(tmp_path, ["ALL_REDUCE", "ALL_GATHER"], sizes, counts)
    names = [w.workload.name for w in written]
    assert len(names) == len(set(names)) == 8
    assert "ALL_REDUCE.1MiB.4r" in names and "ALL_GATHER.1KiB.2r" in names
    for item in written:
        collective, size_text, count_text = item.workload.name.split(".")
        workload = open_workload(item.prefix)
        assert len(workload) == int(count_text.removesuffix("r"))
        for rank in workload.ranks:
            (node,) = workload.trace(rank).nodes
            assert get_attr(node, "comm_type") == CollectiveCommType.Value(collective)
            assert get_attr(node, "comm_size") == micro.parse_size(size_text)


def test_swept_workload_simulates(tmp_path: Path):
    (item,) = micro.sweep_collectives(tmp_path, ["REDUCE_SCATTER"], [1 << 20], [NUM_RANKS])
    assert _simulate(item.prefix).finish_ns > 0


def test_barrier_cannot_be_swept():
    with pytest.raises(ChakraInputError, match="BARRIER carries no data"):
        micro.collective_sweep(["BARRIER"], [1024], [2])


def test_tiny_all_gather_gets_a_note():
    (workload,) = micro.collective_sweep(["ALL_GATHER"], [2], [2])
    assert any("zero chunk size" in note for note in workload.notes)
    (big,) = micro.collective_sweep(["ALL_GATHER"], [1 << 20], [2])
    assert big.notes == []


@pytest.mark.parametrize(
    ("text", "size_bytes"),
    [
        ("512", 512),
        ("512B", 512),
        ("64KiB", 65536),
        ("1MiB", 1 << 20),
        ("1GiB", 1 << 30),
        ("10KB", 10_000),
        ("2MB", 2_000_000),
        ("1.5KiB", 1536),
        (" 4 kib ", 4096),
    ],
)
def test_sizes_accept_units(text: str, size_bytes: int):
    assert micro.parse_size(text) == size_bytes


@pytest.mark.parametrize("text", ["", "KiB", "12XB", "-1", "1.3B", "1e3", "1,5MiB"])
def test_bad_sizes_are_refused(text: str):
    with pytest.raises(ChakraInputError, match="bad"):
        micro.parse_size(text)


@pytest.mark.parametrize(("size_bytes", "text"), [(1 << 20, "1MiB"), (96 << 10, "96KiB"), (1000, "1000B"), (0, "0B")])
def test_sizes_in_names_are_exact(size_bytes: int, text: str):
    assert micro.format_size(size_bytes) == text


def test_repeated_sizes_are_refused():
    with pytest.raises(ChakraInputError, match="twice"):
        micro.parse_sizes("1KiB,1024")


# -- writing ----------------------------------------------------------------------------------


def test_rewriting_with_fewer_ranks_leaves_one_consistent_workload(tmp_path: Path):
    micro.generate(tmp_path, ["ALL_REDUCE"], micro.MicroParams(num_npus=4))
    (item,) = micro.generate(tmp_path, ["ALL_REDUCE"], micro.MicroParams(num_npus=2))
    assert [p.name for p in item.removed_stale] == ["ALL_REDUCE.2.et", "ALL_REDUCE.3.et"]
    assert len(open_workload(item.prefix)) == 2


def test_a_workload_with_groups_gets_its_comm_groups_file(tmp_path: Path):
    workload = micro.collective_workload("ALL_REDUCE", 1 << 20, 2)
    workload.comm_groups = {1: [0, 1]}
    item = micro.write_micro_workload(tmp_path, workload)
    assert item.comm_groups_path == tmp_path / "ALL_REDUCE.comm_groups.json"
    assert dict(open_workload(item.prefix).comm_groups or {}) == {1: (0, 1)}


def test_unknown_family_suggests_the_close_name():
    with pytest.raises(ChakraInputError, match="did you mean ALL_REDUCE"):
        micro.resolve_families(["ALL_REDUSE"])


# -- command line -----------------------------------------------------------------------------


def test_cli_writes_the_named_families_and_prints_notes(tmp_path: Path):
    result = run("generate", "micro", "BARRIER", "send_recv_ring", "-o", str(tmp_path), "--ranks", "2")
    assert result.returncode == 0, result.stderr
    assert "send_recv_ring" in result.stdout and "wrote 2 workloads (4 files)" in result.stdout
    assert "BARRIER" in result.stderr and "Unsupported collective comm type" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "BARRIER.0.et",
        "BARRIER.1.et",
        "send_recv_ring.0.et",
        "send_recv_ring.1.et",
    ]


def test_cli_sweep(tmp_path: Path):
    result = run("generate", "micro", "ALL_TO_ALL", "-o", str(tmp_path), "--sizes", "1KiB,1MiB", "--rank-counts", "2,4")
    assert result.returncode == 0, result.stderr
    assert sorted({p.name.rsplit(".", 2)[0] for p in tmp_path.iterdir()}) == [
        "ALL_TO_ALL.1KiB.2r",
        "ALL_TO_ALL.1KiB.4r",
        "ALL_TO_ALL.1MiB.2r",
        "ALL_TO_ALL.1MiB.4r",
    ]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--sizes", "1KiB,12XB"], "'12XB'"),
        (["--comm-size", "lots"], "--comm-size"),
        (["ALL_REDUSE"], "unknown family 'ALL_REDUSE'"),
        (["one_comp_node", "--rank-counts", "2"], "cannot sweep 'one_comp_node'"),
        (["--ranks", "1"], "at least 2 ranks"),
    ],
)
def test_cli_bad_input_is_one_line_with_exit_2(tmp_path: Path, args: list[str], fragment: str):
    assert_one_line_error(run("generate", "micro", *args, "-o", str(tmp_path)), fragment)


def test_cli_list_has_one_line_per_family():
    result = run("generate", "micro", "--list")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(micro.FAMILIES)


def test_cli_help_has_an_example():
    result = run("generate", "micro", "--help")
    assert result.returncode == 0 and "Example: chakra generate micro" in result.stdout


# -- drop-in ----------------------------------------------------------------------------------


def _generator(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from chakra.cli.dropin import generator_main; sys.argv[0] = 'chakra_generator'; generator_main()"
    )
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_dropin_writes_upstreams_families_into_the_current_directory(tmp_path: Path):
    result = _generator("--num_npus", "2", "--default_comm_size", "4096", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(f"{family}.{rank}.et" for family in micro.UPSTREAM_FAMILIES for rank in range(2))
    (node,) = _nodes(tmp_path / "ALL_REDUCE.1.et")
    assert get_attr(node, "comm_size") == 4096


def test_dropin_in_process_with_output_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from chakra.cli.dropin import generator_main

    monkeypatch.chdir(tmp_path)
    generator_main(["--num_npus", "2", "--output_dir", "out"])
    assert len(list((tmp_path / "out").glob("*.et"))) == 2 * UPSTREAM_FAMILY_COUNT


def test_dropin_bad_value_is_one_line_with_exit_2(tmp_path: Path):
    result = _generator("--default_tensor_size", "0", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "tensor size" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_collective_of_zero_bytes_gets_a_note():
    workload = micro.collective_workload("ALL_REDUCE", 0, 4, runtime_us=5, name="empty")
    assert any("0 bytes moves nothing" in note for note in workload.notes)
