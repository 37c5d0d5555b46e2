"""chakra.text: ASTRA-sim text workloads -> one .et per NPU, graphs and groups per parallelism, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import assert_one_line_error
from helpers import run_cli as run

from chakra import io
from chakra.attrs import find_attr, get_attr
from chakra.errors import ChakraInputError
from chakra.groups import CommGroups
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COMM_COLL_NODE,
    COMP_NODE,
    REDUCE_SCATTER,
    Node,
)
from chakra.sim.config import load_network, load_system
from chakra.sim.run import simulate_workload
from chakra.text import TextConversion, convert_text, parse_text_workload
from chakra.validate import ERROR, WARNING, validate_set
from chakra.workload import open_workload

DATA_DIR = Path(__file__).resolve().parent / "data" / "text"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
SYSTEM = EXAMPLES / "system.json"

TWO_LAYERS = (
    "a -1 10 ALLREDUCE 100 20 ALLREDUCE 200 30 ALLREDUCE 300 0\n"
    "b -1 11 ALLREDUCE 110 21 ALLREDUCE 210 31 ALLREDUCE 310 0\n"
)


def _write(tmp_path: Path, text: str, name: str = "workload.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _convert(tmp_path: Path, text: str, *, npus: int = 4, passes: int = 1, mp: int | None = None) -> TextConversion:
    source = _write(tmp_path, text)
    return convert_text(source, tmp_path / "out", num_npus=npus, num_passes=passes, model_parallel_size=mp)


def _nodes(conversion: TextConversion, rank: int = 0) -> list[Node]:
    return io.read(conversion.paths[rank])[1]


def _shape(nodes: list[Node]) -> list[tuple[str, list[int]]]:
    """(name, data deps) per node, in id order, with the common name prefixes shortened."""
    short = {"COMP_NODE_": "", "COMM_COLL_NODE_": "C_"}
    out = []
    for node in nodes:
        name = node.name
        for long, brief in short.items():
            name = name.replace(long, brief)
        out.append((name, list(node.data_deps)))
    return out


def _pg(nodes: list[Node]) -> dict[str, str | None]:
    """Collective name (shortened) -> its pg_name (None when it spans all NPUs)."""
    return {
        node.name.replace("COMM_COLL_NODE_", "C_"): get_attr(node, "pg_name")
        for node in nodes
        if node.type == COMM_COLL_NODE
    }


# -- parsing -------------------------------------------------------------------------------------


def test_header_options_in_any_order_with_checkpoint_lists(tmp_path: Path):
    layers = "".join(f"l{i} -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n" for i in range(20))
    header = (
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 16 "
        "checkpoints: 2 0 12 checkpoint_initiates: 2 6 18"
    )
    workload = parse_text_workload(_write(tmp_path, f"{header}\n20\n{layers}"))
    assert workload.parallelism == "HYBRID_TRANSFORMER_FWD_IN_BCKWD"
    assert workload.model_parallel_npu_group == 8
    assert workload.checkpoints == (0, 12) and workload.checkpoint_initiates == (6, 18)
    assert workload.options == {"model_parallel_npu_group": 8, "ep": 1, "pp": 1, "vpp": 8, "ga": 1, "all_gpus": 16}
    assert [layer.line for layer in workload.layers[:2]] == [3, 4]


def test_astra_sim_1_transformer_header_with_the_options_reordered(tmp_path: Path):
    text = "HYBRID_TRANSFORMER model_parallel_NPU_group: 8\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n"
    assert parse_text_workload(_write(tmp_path, text)).model_parallel_npu_group == 8
    reordered = (
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD checkpoint_initiates: 1 0 pp_comm 4096 checkpoints: 1 0 "
        "model_parallel_NPU_group: 2\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n"
    )
    workload = parse_text_workload(_write(tmp_path, reordered))
    assert workload.checkpoints == (0,) and workload.options["pp_comm"] == 4096


def test_blank_lines_anywhere_are_ignored(tmp_path: Path):
    text = "\n\nDATA\n\n2\n\n" + TWO_LAYERS.replace("\n", "\n\n") + "\n  \n\t\n"
    workload = parse_text_workload(_write(tmp_path, text))
    assert [layer.name for layer in workload.layers] == ["a", "b"]
    assert workload.layers[1].line == 9


def test_dlrm_reads_the_last_bottom_layer_in_both_spellings(tmp_path: Path):
    layers = "e -1 1 ALLTOALL 8 1 ALLTOALL 8 1 NONE 0 0\nm -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 0\n"
    assert parse_text_workload(_write(tmp_path, f"HYBRID_DLRM 1\n2\n{layers}")).dlrm_last_bottom_layer == 1
    simai = f"HYBRID_DLRM_ENHANCED DLRM_LAST_BOTTOM_LAYER: 0\n2\n{layers}"
    assert parse_text_workload(_write(tmp_path, simai)).dlrm_last_bottom_layer == 0


def test_customized_layers_name_their_parallelism_after_the_name_or_last(tmp_path: Path):
    text = (
        "HYBRID_CUSTOMIZED\n2\n"
        "a MODEL -1 1 ALLREDUCE 8 1 NONE 0 1 NONE 0 0\n"
        "b -1 1 ALLREDUCE 8 1 NONE 0 1 NONE 0 0 HYBRID_DATA_MODEL\n"
    )
    workload = parse_text_workload(_write(tmp_path, text))
    assert [(layer.parallelism, layer.fwd.comm_size_bytes) for layer in workload.layers] == [
        ("MODEL", 8),
        ("HYBRID_DATA_MODEL", 8),
    ]


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("DATA\n1\na -1 1 ALLREDUX 8 1 NONE 0 1 NONE 0 0\n", ["line 3, column 4 (forward comm type)", "ALLREDUX"]),
        ("DATA\n1\na -1 1 NONE 0 1 NONE 0 1.5 NONE 0 0\n", ["line 3, column 9 (weight-gradient compute time)"]),
        ("DATA\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0\n", ["line 3", "has 12 columns, this one 11"]),
        ("DATA\n3\n" + TWO_LAYERS, ["line 2", "declares 3 layers but 2 layer lines follow"]),
        ("DATA\n1\na -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 18446744073709551616 0\n", ["column 11", "fit 64 bits"]),
        ("", ["empty workload file"]),
        ("PIPELINE\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n", ["line 1, column 1 (parallelism)", "'PIPELINE'"]),
        ("DATA\n" + TWO_LAYERS, ["line 2, column 1 (layer count)"]),
        ("HYBRID_DLRM\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n", ["line 1", "last bottom-MLP layer"]),
        ("HYBRID_TRANSFORMER model_parallel_NPU_group:\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n", ["has no value"]),
        ("HYBRID_CUSTOMIZED\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0 PIPE\n", ["column 13 (layer parallelism)"]),
    ],
    ids=[
        "unknown-comm-type",
        "non-integer",
        "column-count",
        "layer-count-mismatch",
        "too-large",
        "empty",
        "unknown-parallelism",
        "missing-count",
        "dlrm-without-bottom",
        "option-without-value",
        "customized-unknown",
    ],
)
def test_malformed_input_names_line_and_column(tmp_path: Path, text: str, fragments: list[str]):
    with pytest.raises(ChakraInputError) as caught:
        parse_text_workload(_write(tmp_path, text))
    message = str(caught.value)
    assert "workload.txt" in message and "hint:" in message
    for fragment in fragments:
        assert fragment in message


def test_comm_type_hints_name_the_fix(tmp_path: Path):
    for token, hint in (("allreduce", "upper case: ALLREDUCE"), ("ALLTOALL_EP", "EP communicator\\) is not supported")):
        with pytest.raises(ChakraInputError, match=hint):
            parse_text_workload(_write(tmp_path, f"DATA\n1\na -1 1 {token} 8 1 NONE 0 1 NONE 0 0\n"))


def test_a_recompute_without_a_checkpoint_below_is_refused(tmp_path: Path):
    text = (
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 checkpoints: 1 1 checkpoint_initiates: 1 0\n"
        "2\n" + TWO_LAYERS
    )
    with pytest.raises(ChakraInputError, match="no checkpoint is at or below it"):
        parse_text_workload(_write(tmp_path, text))


def test_a_missing_file_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="no such file"):
        parse_text_workload(tmp_path / "absent.txt")


# -- graphs per parallelism (hand-checked) -------------------------------------------------------------


def test_data_parallel_graph_over_two_passes(tmp_path: Path):
    text = "DATA\n2\na -1 10 NONE 0 20 NONE 0 30 ALLREDUCE 1000 0\nb -1 11 NONE 0 21 NONE 0 31 ALLREDUCE 2000 0\n"
    conversion = _convert(tmp_path, text, passes=2)
    nodes = _nodes(conversion)
    one_pass = [
        ("a_FWD", []), ("b_FWD", [0]), ("b_BWD_WG", [1]), ("C_b_WG_ALLREDUCE", [2]), ("b_BWD_IG", [2]),
        ("a_BWD_WG", [4]), ("C_a_WG_ALLREDUCE", [5]),
    ]  # fmt: skip
    second = [
        ("a_FWD", [5, 6]), ("b_FWD", [3, 7]), ("b_BWD_WG", [8]), ("C_b_WG_ALLREDUCE", [9]), ("b_BWD_IG", [9]),
        ("a_BWD_WG", [11]), ("C_a_WG_ALLREDUCE", [12]),
    ]  # fmt: skip
    assert _shape(nodes) == one_pass + second
    assert [n.duration_micros for n in nodes[:3]] == [10, 11, 31]
    assert [(get_attr(n, "comm_type"), get_attr(n, "comm_size")) for n in nodes if n.type == COMM_COLL_NODE] == [
        (ALL_REDUCE, 2000), (ALL_REDUCE, 1000)
    ] * 2  # fmt: skip
    assert conversion.comm_groups_path is None and not _pg(nodes)["C_a_WG_ALLREDUCE"]


def test_micro_issues_only_weight_gradient_collectives_without_dependencies(tmp_path: Path):
    conversion = convert_text(DATA_DIR / "micro.txt", tmp_path / "micro", num_npus=2, num_passes=2)
    nodes = _nodes(conversion)
    assert _shape(nodes) == [("C_conv1_WG_ALLREDUCE", []), ("C_conv1_WG_ALLREDUCE", [])]
    assert get_attr(nodes[0], "comm_size") == 1048576
    assert any("compute times of 1 layer are not used" in note for note in conversion.notes)


def test_micro_issues_layer_0_only_as_astra_sim(tmp_path: Path):
    text = "MICRO\n2\na -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 1024 0\nb -1 1 NONE 0 1 NONE 0 1 ALLGATHER 2048 0\n"
    conversion = _convert(tmp_path, text, passes=2)
    assert _shape(_nodes(conversion)) == [("C_a_WG_ALLREDUCE", []), ("C_a_WG_ALLREDUCE", [])]
    assert any("layer 0's collective only" in note for note in conversion.notes)


def test_compute_times_in_ns_are_converted_to_us(tmp_path: Path):
    text = "DATA\n1\na -1 2500 NONE 0 400 NONE 0 7000 ALLREDUCE 1024 0\n"
    conversion = convert_text(_write(tmp_path, text), tmp_path / "w", num_npus=2, time_unit="ns")
    assert [n.duration_micros for n in _nodes(conversion) if n.type == COMP_NODE] == [2, 7]  # fwd, wg (IG unused)
    as_us = convert_text(_write(tmp_path, text), tmp_path / "u", num_npus=2)
    assert any("--time-unit ns" in note for note in as_us.notes)


def test_simai_headers_with_a_float_pp_comm_no_accumulation_and_the_old_ep_spelling_are_read(tmp_path: Path):
    header = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 expert_parallel_npu_group: 1 pp: 1 "
    header += "ga: 0 all_gpus: 4 pp_comm: 8388608.0 checkpoints: 0 checkpoint_initiates: 0"
    workload = parse_text_workload(_write(tmp_path, header + "\n2\n" + TWO_LAYERS))
    assert (workload.options["pp_comm"], workload.options["ga"], workload.options["ep"]) == (8388608, 0, 1)


def test_a_customized_layer_0_of_dlrm_kind_keeps_its_own_spans(tmp_path: Path):
    text = (
        "HYBRID_CUSTOMIZED\n2\na HYBRID_DLRM -1 1 ALLTOALL 64 1 ALLTOALL 64 1 NONE 0 0\n"
        "b DATA -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 0\n"
    )
    nodes = _nodes(_convert(tmp_path, text))
    # only a DLRM workload gives its layer 0 every dimension: here the DLRM layer's forward is local
    assert not [n for n in nodes if n.name.startswith("COMM_COLL_NODE_a_FWD")]


def test_model_parallel_graph(tmp_path: Path):
    text = (
        "MODEL\n2\n"
        "a -1 10 ALLGATHER 100 20 ALLREDUCE 200 30 ALLREDUCE 300 0\n"
        "b -1 11 REDUCESCATTER 110 21 ALLTOALL 210 31 NONE 0 0\n"
    )
    conversion = _convert(tmp_path, text)
    nodes = _nodes(conversion)
    assert _shape(nodes) == [
        ("a_FWD", []), ("C_a_FWD_ALLGATHER", [0]), ("b_FWD", [1]), ("C_b_FWD_REDUCESCATTER", [2]),
        ("b_BWD_IG", [3]), ("C_b_IG_ALLTOALL", [4]), ("b_BWD_WG", [4]), ("a_BWD_IG", [5, 6]), ("a_BWD_WG", [7]),
    ]  # fmt: skip
    assert [get_attr(n, "comm_type") for n in nodes if n.type == COMM_COLL_NODE] == [
        ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL
    ]  # fmt: skip
    notes = " | ".join(conversion.notes)
    assert "MODEL issues no weight-gradient collectives" in notes and "layer 0's input gradient" in notes


HYBRID = (
    "{kind}\n2\n"
    "l0 -1 10 ALLREDUCE 1024 20 ALLGATHER 2048 30 ALLREDUCE 4096 0\n"
    "l1 -1 11 NONE 0 21 ALLREDUCE 512 31 REDUCESCATTER 8192 0\n"
)
HYBRID_SHAPE = [
    ("l0_FWD", []), ("C_l0_FWD_ALLREDUCE", [0]), ("l1_FWD", [1]), ("l1_BWD_IG", [2]), ("C_l1_IG_ALLREDUCE", [3]),
    ("l1_BWD_WG", [3]), ("C_l1_WG_REDUCESCATTER", [5]), ("l0_BWD_IG", [4, 5]), ("l0_BWD_WG", [7]),
    ("C_l0_WG_ALLREDUCE", [8]),
]  # fmt: skip


def test_hybrid_data_model_is_model_parallel_in_the_first_dimension(tmp_path: Path):
    conversion = _convert(tmp_path, HYBRID.format(kind="HYBRID_DATA_MODEL"), npus=8, passes=2, mp=2)
    nodes = _nodes(conversion, rank=3)
    assert _shape(nodes[:10]) == HYBRID_SHAPE
    assert _shape(nodes[10:13]) == [("l0_FWD", [8, 9]), ("C_l0_FWD_ALLREDUCE", [10]), ("l1_FWD", [6, 11])]
    # rank 3: model group = its block of 2 ({2, 3}); data group = position 1 of every block
    assert conversion.groups == {1: [0, 1], 2: [2, 3], 3: [4, 5], 4: [6, 7], 5: [0, 2, 4, 6], 6: [1, 3, 5, 7]}
    assert _pg(nodes[:10]) == {
        "C_l0_FWD_ALLREDUCE": "2", "C_l1_IG_ALLREDUCE": "2", "C_l1_WG_REDUCESCATTER": "6", "C_l0_WG_ALLREDUCE": "6",
    }  # fmt: skip
    assert CommGroups.read(conversion.comm_groups_path) == CommGroups(conversion.groups)


def test_hybrid_model_data_is_data_parallel_in_the_first_dimension(tmp_path: Path):
    conversion = _convert(tmp_path, HYBRID.format(kind="HYBRID_MODEL_DATA"), npus=8, mp=2)
    nodes = _nodes(conversion, rank=3)
    assert _shape(nodes) == HYBRID_SHAPE
    assert _pg(nodes) == {
        "C_l0_FWD_ALLREDUCE": "6", "C_l1_IG_ALLREDUCE": "6", "C_l1_WG_REDUCESCATTER": "2", "C_l0_WG_ALLREDUCE": "2",
    }  # fmt: skip


def test_hybrid_without_a_model_parallel_size_spans_all_npus_and_says_so(tmp_path: Path):
    conversion = _convert(tmp_path, HYBRID.format(kind="HYBRID_DATA_MODEL"), npus=8)
    assert set(_pg(_nodes(conversion)).values()) == {None}
    assert conversion.comm_groups_path is None and conversion.distinct_files == 1
    assert any("--model-parallel-size" in note for note in conversion.notes)


def test_the_header_model_parallel_group_sets_the_first_dimension_of_a_hybrid(tmp_path: Path):
    text = HYBRID.format(kind="HYBRID_DATA_MODEL model_parallel_NPU_group: 4")
    conversion = _convert(tmp_path, text, npus=8)
    assert conversion.groups[1] == [0, 1, 2, 3] and conversion.groups[3] == [0, 4]


def test_a_model_parallel_size_that_does_not_divide_the_npus_is_refused(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="does not divide the 8 NPUs"):
        _convert(tmp_path, HYBRID.format(kind="HYBRID_DATA_MODEL"), npus=8, mp=3)


def test_a_group_of_one_npu_emits_no_collective(tmp_path: Path):
    # model parallel over all 4 NPUs: the data-parallel (WG) groups have one NPU each
    conversion = _convert(tmp_path, HYBRID.format(kind="HYBRID_DATA_MODEL"), npus=4, mp=4)
    names = [n.name for n in _nodes(conversion)]
    assert not any("_WG_" in name and name.startswith("COMM") for name in names)
    assert any("single NPU" in note for note in conversion.notes)
    assert conversion.comm_groups_path is None


def test_one_npu_has_no_collectives(tmp_path: Path):
    conversion = _convert(tmp_path, "DATA\n2\n" + TWO_LAYERS, npus=1)
    assert {n.type for n in _nodes(conversion)} == {COMP_NODE}
    assert any("its group has a single NPU" in note for note in conversion.notes)


def test_dlrm_embedding_all_to_all_and_its_waits(tmp_path: Path):
    text = (
        "HYBRID_DLRM 1\n3\n"
        "emb -1 10 ALLTOALL 100 20 ALLTOALL 200 30 NONE 0 0\n"
        "bot -1 11 NONE 0 21 NONE 0 31 ALLREDUCE 300 0\n"
        "top -1 12 NONE 0 22 NONE 0 32 ALLREDUCE 400 0\n"
    )
    nodes = _nodes(_convert(tmp_path, text, passes=2))
    assert _shape(nodes[:12]) == [
        ("emb_FWD", []), ("C_emb_FWD_ALLTOALL", [0]), ("bot_FWD", [0]), ("top_FWD", [1, 2]),
        ("top_BWD_WG", [3]), ("C_top_WG_ALLREDUCE", [4]), ("top_BWD_IG", [4]), ("C_emb_IG_ALLTOALL", [6]),
        ("bot_BWD_WG", [6]), ("C_bot_WG_ALLREDUCE", [8]), ("bot_BWD_IG", [8]), ("emb_BWD_WG", [10]),
    ]  # fmt: skip
    # HYBRID_DLRM waits for the embedding's IG all-to-all before the next pass
    assert _shape(nodes[12:13]) == [("emb_FWD", [7, 11])]
    assert get_attr(nodes[7], "comm_size") == 200 and get_attr(nodes[7], "comm_type") == ALL_TO_ALL

    enhanced = _nodes(_convert(tmp_path, text.replace("HYBRID_DLRM", "HYBRID_DLRM_ENHANCED"), passes=2))
    assert _shape(enhanced[12:13]) == [("emb_FWD", [11])]


def test_transformer_input_gradient_collective_blocks_the_weight_gradient(tmp_path: Path):
    conversion = _convert(tmp_path, "HYBRID_TRANSFORMER model_parallel_NPU_group: 2\n2\n" + TWO_LAYERS)
    nodes = _nodes(conversion, rank=2)
    assert _shape(nodes) == [
        ("a_FWD", []), ("C_a_FWD_ALLREDUCE", [0]), ("b_FWD", [1]), ("C_b_FWD_ALLREDUCE", [2]),
        ("b_BWD_IG", [3]), ("C_b_IG_ALLREDUCE", [4]), ("b_BWD_WG", [5]), ("C_b_WG_ALLREDUCE", [6]),
        ("a_BWD_IG", [6]), ("C_a_IG_ALLREDUCE", [8]), ("a_BWD_WG", [9]), ("C_a_WG_ALLREDUCE", [10]),
    ]  # fmt: skip
    assert conversion.groups == {1: [0, 1], 2: [2, 3], 3: [0, 2], 4: [1, 3]}
    assert [get_attr(n, "pg_name") for n in nodes if n.type == COMM_COLL_NODE] == ["2", "2", "2", "3", "2", "3"]


def test_transformer_needs_the_model_parallel_group(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="model_parallel_NPU_group"):
        _convert(tmp_path, "HYBRID_TRANSFORMER\n2\n" + TWO_LAYERS)
    assert _convert(tmp_path, "HYBRID_TRANSFORMER\n2\n" + TWO_LAYERS, mp=2).groups[1] == [0, 1]


def test_forward_in_backward_recomputes_from_the_checkpoint(tmp_path: Path):
    text = (
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 checkpoints: 1 0 checkpoint_initiates: 1 2\n"
        "3\n"
        "a -1 10 ALLREDUCE 100 20 NONE 0 30 ALLREDUCE 300 0\n"
        "b -1 11 NONE 0 21 NONE 0 31 ALLREDUCE 310 0\n"
        "c -1 12 ALLREDUCE 120 22 ALLREDUCE 220 32 ALLREDUCE 320 0\n"
    )
    nodes = _nodes(_convert(tmp_path, text))
    assert _shape(nodes) == [
        ("a_FWD", []), ("C_a_FWD_ALLREDUCE", [0]), ("b_FWD", [1]), ("c_FWD", [2]), ("C_c_FWD_ALLREDUCE", [3]),
        ("a_FWD_RECOMPUTE", [4]), ("C_a_FWD_RECOMPUTE_ALLREDUCE", [5]), ("b_FWD_RECOMPUTE", [6]),
        ("c_BWD_IG", [7]), ("C_c_IG_ALLREDUCE", [8]), ("c_BWD_WG", [9]), ("C_c_WG_ALLREDUCE", [10]),
        ("b_BWD_IG", [10]), ("b_BWD_WG", [12]), ("C_b_WG_ALLREDUCE", [13]),
        ("a_BWD_IG", [13]), ("a_BWD_WG", [15]), ("C_a_WG_ALLREDUCE", [16]),
    ]  # fmt: skip
    assert nodes[5].duration_micros == 10 and get_attr(nodes[6], "pg_name") == "1"


def test_customized_layers_take_the_groups_of_their_own_parallelism(tmp_path: Path):
    text = (
        "HYBRID_CUSTOMIZED model_parallel_NPU_group: 2\n3\n"
        "a DATA -1 10 ALLREDUCE 100 20 ALLREDUCE 200 30 ALLREDUCE 300 0\n"
        "b -1 11 ALLREDUCE 110 21 ALLREDUCE 210 31 ALLREDUCE 310 0 MODEL\n"
        "c HYBRID_DATA_MODEL -1 12 ALLREDUCE 120 22 ALLREDUCE 220 32 ALLREDUCE 320 0\n"
    )
    conversion = _convert(tmp_path, text)
    nodes = _nodes(conversion, rank=1)
    assert _shape(nodes) == [
        ("a_FWD", []), ("b_FWD", [0]), ("C_b_FWD_ALLREDUCE", [1]), ("c_FWD", [2]), ("C_c_FWD_ALLREDUCE", [3]),
        ("c_BWD_IG", [4]), ("C_c_IG_ALLREDUCE", [5]), ("c_BWD_WG", [5]), ("C_c_WG_ALLREDUCE", [7]),
        ("b_BWD_IG", [6, 7]), ("C_b_IG_ALLREDUCE", [9]), ("b_BWD_WG", [9]),
        ("a_BWD_IG", [10, 11]), ("a_BWD_WG", [12]), ("C_a_WG_ALLREDUCE", [13]),
    ]  # fmt: skip
    assert _pg(nodes) == {
        "C_b_FWD_ALLREDUCE": None, "C_c_FWD_ALLREDUCE": "1", "C_c_IG_ALLREDUCE": "1", "C_c_WG_ALLREDUCE": "4",
        "C_b_IG_ALLREDUCE": None, "C_a_WG_ALLREDUCE": None,
    }  # fmt: skip


def test_distributed_inference_runs_the_forward_only(tmp_path: Path):
    nodes = _nodes(_convert(tmp_path, "DISTRIBUTED_INFERENCE\n2\n" + TWO_LAYERS, passes=2))
    assert _shape(nodes) == [
        ("a_FWD", []), ("C_a_FWD_ALLREDUCE", [0]), ("b_FWD", [1]), ("C_b_FWD_ALLREDUCE", [2]),
        ("a_FWD", [3]), ("C_a_FWD_ALLREDUCE", [4]), ("b_FWD", [5]), ("C_b_FWD_ALLREDUCE", [6]),
    ]  # fmt: skip


# -- what every file holds -----------------------------------------------------------------------


def test_none_is_never_written_as_all_reduce(tmp_path: Path):
    text = "MODEL\n2\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\nb -1 1 ALLGATHER 64 1 NONE 0 1 NONE 0 0\n"
    conversion = _convert(tmp_path, text)
    collectives = [n for n in _nodes(conversion) if n.type == COMM_COLL_NODE]
    assert [(n.name, get_attr(n, "comm_type")) for n in collectives] == [("COMM_COLL_NODE_b_FWD_ALLGATHER", ALL_GATHER)]
    assert any("comm type NONE" in note for note in conversion.notes)


def test_zero_byte_collectives_are_dropped_and_counted(tmp_path: Path):
    conversion = _convert(tmp_path, "DATA\n1\na -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 0 0\n")
    assert [n.type for n in _nodes(conversion)] == [COMP_NODE, COMP_NODE]
    assert any("comm size 0" in note for note in conversion.notes)


def test_a_workload_with_nothing_to_simulate_is_refused(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="nothing to simulate"):
        _convert(tmp_path, "MICRO\n1\na -1 0 NONE 0 0 NONE 0 0 NONE 0 0\n")


def test_every_file_numbers_its_nodes_from_zero(tmp_path: Path):
    conversion = _convert(tmp_path, "HYBRID_TRANSFORMER model_parallel_NPU_group: 2\n2\n" + TWO_LAYERS, passes=2)
    for rank in range(4):
        assert [n.id for n in _nodes(conversion, rank)] == list(range(conversion.nodes_per_rank))


def test_node_attributes_use_the_value_kinds_consumers_read(tmp_path: Path):
    conversion = _convert(tmp_path, "HYBRID_TRANSFORMER model_parallel_NPU_group: 2\n2\n" + TWO_LAYERS)
    for node in _nodes(conversion, rank=1):
        assert get_attr(node, "is_cpu_op") is False
        if node.type == COMM_COLL_NODE:
            kinds = {name: find_attr(node, name).WhichOneof("value") for name in ("comm_type", "comm_size", "pg_name")}
            assert kinds == {"comm_type": "int64_val", "comm_size": "int64_val", "pg_name": "string_val"}
        # the bytes are protobuf's own (pg_name appended last is the canonical encoding)
        assert Node.FromString(node.SerializeToString()) == node
    raw = conversion.paths[1].read_bytes()
    metadata, nodes = io.read(conversion.paths[1])
    rebuilt = io.frame(metadata.SerializeToString()) + b"".join(io.frame(n.SerializeToString()) for n in nodes)
    assert raw == rebuilt


def test_metadata_carries_the_input_text_and_parallelism(tmp_path: Path):
    text = "DATA\n2\n" + TWO_LAYERS
    conversion = _convert(tmp_path, text)
    metadata = io.read_metadata(conversion.paths[0])
    attrs = {a.name: a for a in metadata.attr}
    assert metadata.version == io.FORMAT_VERSION
    assert attrs["input_file"].string_val == text and attrs["parallelism"].string_val == "DATA"


def test_ranks_with_the_same_groups_share_one_serialization(tmp_path: Path):
    data = _convert(tmp_path, "DATA\n2\n" + TWO_LAYERS, npus=64)
    assert data.distinct_files == 1
    assert len({path.read_bytes() for path in data.paths}) == 1
    transformer = _convert(tmp_path, "HYBRID_TRANSFORMER model_parallel_NPU_group: 4\n2\n" + TWO_LAYERS, npus=16)
    assert transformer.distinct_files == 16
    rank = 9  # block 2 of 4 NPUs (group 3), position 1 (group 4 + 1 + 1 = 6)
    assert set(_pg(_nodes(transformer, rank)).values()) == {"3", "6"}
    assert transformer.groups[3] == [8, 9, 10, 11] and transformer.groups[6] == [1, 5, 9, 13]


def test_header_options_not_modelled_are_noted(tmp_path: Path):
    text = "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 pp: 2 vpp: 4 ga: 8 all_gpus: 16 mode: 1\n2\n" + TWO_LAYERS
    notes = " | ".join(_convert(tmp_path, text).notes)
    for fragment in ("pp: 2", "vpp: 4", "ga: 8", "all_gpus: 16 differs", "'mode' (value '1') is unknown"):
        assert fragment in notes


# -- consumers: the validator and the simulator -----------------------------------------------------------

KINDS = {
    "MICRO": ("MICRO\n2\n" + TWO_LAYERS, None),
    "DATA": ("DATA\n2\n" + TWO_LAYERS, None),
    "MODEL": ("MODEL\n2\n" + TWO_LAYERS, None),
    "HYBRID_DATA_MODEL": ("HYBRID_DATA_MODEL\n2\n" + TWO_LAYERS, 2),
    "HYBRID_MODEL_DATA": ("HYBRID_MODEL_DATA\n2\n" + TWO_LAYERS, 2),
    "HYBRID_DLRM": ((DATA_DIR / "dlrm.txt").read_text(), None),
    "HYBRID_DLRM_ENHANCED": ((DATA_DIR / "dlrm.txt").read_text().replace("DLRM", "DLRM_ENHANCED", 1), None),
    "HYBRID_TRANSFORMER": ("HYBRID_TRANSFORMER model_parallel_NPU_group: 2\n2\n" + TWO_LAYERS, None),
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD": ((DATA_DIR / "transformer_fwd_in_bckwd.txt").read_text(), None),
    "HYBRID_CUSTOMIZED": (
        "HYBRID_CUSTOMIZED\n2\na DATA -1 1 ALLREDUCE 8 1 NONE 0 1 ALLREDUCE 64 0\n"
        "b HYBRID_MODEL_DATA -1 1 ALLGATHER 64 1 ALLREDUCE 64 1 ALLREDUCE 64 0\n",
        2,
    ),
    "DISTRIBUTED_INFERENCE": ("DISTRIBUTED_INFERENCE\n2\n" + TWO_LAYERS, None),
}


@pytest.fixture(scope="module")
def network_2x2(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("net") / "ring2x2.yml"
    path.write_text(
        "topology: [ Ring, Ring ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 50.0, 25.0 ]\nlatency: [ 500.0, 500.0 ]\n"
    )
    return load_network(path)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_parallelism_validates_for_astra_sim_and_simulates(tmp_path: Path, kind: str, network_2x2):
    text, model_parallel = KINDS[kind]
    conversion = _convert(tmp_path, text, npus=4, passes=2, mp=model_parallel)
    assert conversion.parallelism == kind
    findings = validate_set(open_workload(conversion.prefix, whole=True), target="astra-sim")
    assert [f for f in findings if f.severity in (ERROR, WARNING)] == []
    result = simulate_workload(conversion.prefix, load_system(SYSTEM), network_2x2)
    assert sorted(result.ranks) == [0, 1, 2, 3] and result.finish_ns > 0


def test_upstream_example_files_convert(tmp_path: Path):
    for name, npus in (("micro.txt", 2), ("resnet50_data_excerpt.txt", 8), ("dlrm.txt", 8)):
        conversion = convert_text(DATA_DIR / name, tmp_path / name.split(".")[0], num_npus=npus)
        assert len(conversion.paths) == npus and conversion.nodes_per_rank > 0
    resnet = _nodes(convert_text(DATA_DIR / "resnet50_data_excerpt.txt", tmp_path / "r", num_npus=2))
    assert [(n.name, n.duration_micros) for n in resnet[:2]] == [
        ("COMP_NODE_conv1_FWD", 13003), ("COMP_NODE_layer_64_1_conv4_FWD", 3456)
    ]  # fmt: skip


# -- command lines ----------------------------------------------------------------------------


def test_convert_text_command_writes_files_and_prints_notes(tmp_path: Path):
    source = _write(tmp_path, HYBRID.format(kind="HYBRID_DATA_MODEL"))
    result = run("convert", "text", str(source), "-o", str(tmp_path / "job"), "--num-npus", "4",
                 "--num-passes", "2", "--model-parallel-size", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "wrote 4 files" in result.stdout and "job.comm_groups.json (4 groups)" in result.stdout
    assert "note: " in result.stderr and "comm type NONE" in result.stderr
    assert sorted(p.name for p in tmp_path.glob("job.*")) == [
        "job.0.et", "job.1.et", "job.2.et", "job.3.et", "job.comm_groups.json"
    ]  # fmt: skip


def test_convert_text_help_has_an_example():
    result = run("convert", "text", "--help")
    assert result.returncode == 0 and "Example: chakra convert text" in result.stdout


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("DATA\n1\na -1 1 ALLREDUX 8 1 NONE 0 1 NONE 0 0\n", "line 3, column 4"),
        ("DATA\n1\na -1 x NONE 0 1 NONE 0 1 NONE 0 0\n", "line 3, column 3"),
        ("DATA\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0 7\n", "line 3"),
        ("DATA\n2\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n", "line 2"),
        ("", "empty workload file"),
        ("PIPELINE\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n", "line 1, column 1"),
    ],
    ids=["comm-type", "integer", "columns", "missing-layers", "empty", "parallelism"],
)
def test_convert_text_bad_input_is_one_line_and_exit_2(tmp_path: Path, text: str, fragment: str):
    source = _write(tmp_path, text)
    result = run("convert", "text", str(source), "-o", str(tmp_path / "job"), "--num-npus", "2")
    assert_one_line_error(result, "workload.txt", fragment)
    assert not list(tmp_path.glob("job.*"))


def test_convert_text_refuses_zero_npus_in_one_line(tmp_path: Path):
    source = _write(tmp_path, "DATA\n2\n" + TWO_LAYERS)
    assert_one_line_error(
        run("convert", "text", str(source), "-o", str(tmp_path / "j"), "--num-npus", "0"), "--num-npus"
    )


def _converter(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``chakra_converter`` console script's entry point the way upstream scripts call it."""
    code = (
        "import sys; from chakra.cli.dropin import converter_main; sys.argv[0] = 'chakra_converter'; converter_main()"
    )
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


def test_dropin_text_converter_with_upstream_flags(tmp_path: Path):
    log = tmp_path / "log.json"
    result = _converter(
        "--log-filename", str(log), "Text", "--input", str(DATA_DIR / "resnet50_data_excerpt.txt"),
        "--output", str(tmp_path / "resnet"), "--num-npus", "4", "--num-passes", "2",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("resnet.*.et")) == [f"resnet.{n}.et" for n in range(4)]
    report = json.loads(log.read_text())
    assert report["num_passes"] == 2 and report["nodes_per_rank"] == 14


def test_dropin_text_converter_bad_input_exits_2(tmp_path: Path):
    result = _converter("Text", "--input", str(tmp_path / "absent.txt"), "--output", "x", "--num-npus", "2")
    assert result.returncode == 2 and "no such file" in result.stderr and "Traceback" not in result.stderr


def test_a_smaller_conversion_removes_the_files_of_a_larger_one(tmp_path: Path):
    workload = tmp_path / "w.txt"
    workload.write_text("DATA\n1\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1048576 5\n")
    convert_text(workload, tmp_path / "w", num_npus=8)
    conversion = convert_text(workload, tmp_path / "w", num_npus=4)
    assert sorted(p.name for p in tmp_path.glob("w.*.et")) == [f"w.{r}.et" for r in range(4)]
    assert any("removed 4 files" in note for note in conversion.notes)
