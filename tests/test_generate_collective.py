"""``chakra generate collective``: collective algorithms written as per-rank ETs of SEND, RECV and
COMP nodes (:mod:`chakra.generate.collective`), the form ASTRA-sim's custom collectives take."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

from chakra import io
from chakra.attrs import get_attr
from chakra.errors import ChakraInputError
from chakra.generate.collective import AlgorithmSpec, algorithm_ranks
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE

MIB = 1 << 20


def _sent_bytes(nodes) -> int:
    return sum(get_attr(node, "comm_size") for node in nodes if node.type == COMM_SEND_NODE)


def test_a_ring_all_reduce_is_one_chain_of_send_receive_reduce_then_send_receive():
    # the shape of ASTRA-sim's example algorithm (MSCCLang's ring over 8 ranks, 1 MiB)
    rank_0 = algorithm_ranks(AlgorithmSpec("ring", "all-reduce", ranks=8, size_bytes=MIB))[0]
    kinds = [node.type for node in rank_0]
    assert kinds == [COMM_SEND_NODE, COMM_RECV_NODE, COMP_NODE] * 7 + [COMM_SEND_NODE, COMM_RECV_NODE] * 7
    assert all(list(node.data_deps) == [node.id - 1] for node in rank_0[1:])
    assert {get_attr(node, "comm_size") for node in rank_0 if node.type != COMP_NODE} == {MIB // 8}
    assert {node.duration_micros for node in rank_0 if node.type == COMP_NODE} == {7}  # 3 x 128 KiB at 50 GB/s
    assert {get_attr(node, "comm_dst") for node in rank_0 if node.type == COMM_SEND_NODE} == {1}
    assert {get_attr(node, "comm_src") for node in rank_0 if node.type == COMM_RECV_NODE} == {7}


@pytest.mark.parametrize(
    ("algorithm", "collective", "sent_fraction"),
    [
        ("ring", "all-reduce", 2 * 7 / 8),
        ("bidirectional-ring", "all-reduce", 2 * 7 / 8),
        ("direct", "all-reduce", 2 * 7 / 8),
        ("halving-doubling", "all-reduce", 2 * 7 / 8),
        ("ring", "reduce-scatter", 7 / 8),
        ("direct", "all-to-all", 7 / 8),
        ("ring", "all-gather", 7),  # an all-gather's size is each rank's own part
        ("double-binary-tree", "all-reduce", None),
    ],
)
def test_every_rank_sends_what_the_algorithm_moves(algorithm: str, collective: str, sent_fraction: float | None):
    ranks = algorithm_ranks(AlgorithmSpec(algorithm, collective, ranks=8, size_bytes=MIB))
    sent = [_sent_bytes(nodes) for nodes in ranks]
    if sent_fraction is None:  # a tree: inner ranks send more than leaves, every rank sends something
        assert min(sent) > 0 and max(sent) > min(sent)
    else:
        assert sent == [int(MIB * sent_fraction)] * 8


def test_every_send_has_its_receive_on_the_peer():
    for algorithm in ("ring", "bidirectional-ring", "direct", "halving-doubling", "double-binary-tree"):
        ranks = algorithm_ranks(AlgorithmSpec(algorithm, "all-reduce", ranks=8, size_bytes=MIB))
        sends = sorted(
            (rank, get_attr(n, "comm_dst"), get_attr(n, "comm_tag"), get_attr(n, "comm_size"))
            for rank, nodes in enumerate(ranks) for n in nodes if n.type == COMM_SEND_NODE
        )  # fmt: skip
        receives = sorted(
            (get_attr(n, "comm_src"), rank, get_attr(n, "comm_tag"), get_attr(n, "comm_size"))
            for rank, nodes in enumerate(ranks) for n in nodes if n.type == COMM_RECV_NODE
        )  # fmt: skip
        assert sends == receives, algorithm


def test_halving_doubling_over_a_count_that_is_not_a_power_of_two_is_refused():
    with pytest.raises(ChakraInputError, match="power-of-two"):
        algorithm_ranks(AlgorithmSpec("halving-doubling", "all-reduce", ranks=6, size_bytes=MIB))


def test_the_command_writes_a_file_per_rank_and_says_what_the_system_file_needs(tmp_path: Path):
    done = run_cli("generate", "collective", "-o", str(tmp_path / "algo" / "dbt"), "--algorithm",
                   "double-binary-tree", "--ranks", "16", "--size", "4MiB")  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "algo").iterdir()) == sorted(f"dbt.{r}.et" for r in range(16))
    assert '"all-reduce-implementation-custom"' in done.stdout and '"preferred-dataset-splits": 1' in done.stdout
    metadata, _nodes = io.read(tmp_path / "algo" / "dbt.0.et")
    assert {attr.name: attr.string_val or attr.int64_val for attr in metadata.attr} == {
        "algorithm": "double-binary-tree", "collective": "all-reduce", "size_bytes": 4 * MIB
    }  # fmt: skip


def test_a_collective_the_algorithm_does_not_write_is_one_line_exit_2(tmp_path: Path):
    done = run_cli("generate", "collective", "-o", str(tmp_path / "a"), "--algorithm", "double-binary-tree",
                   "--collective", "all-to-all")  # fmt: skip
    assert done.returncode == 2 and "double-binary-tree does not write all-to-all" in done.stderr


def _ring_of(npus: int, folder: Path) -> Path:
    path = folder / "ring.yml"
    path.write_text(f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    return path


def test_compare_says_an_all_gather_without_endpoint_delay_equals_the_built_in_ring(tmp_path: Path):
    done = run_cli("generate", "collective", "-o", str(tmp_path / "ag"), "--collective", "all-gather", "--compare",
                   str(_ring_of(8, tmp_path)), "--endpoint-delay", "0")  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "(+0 ns)" in " ".join(done.stdout.split()) and "why they differ" not in done.stdout + done.stderr


def test_compare_says_by_how_much_and_why_an_all_reduce_differs_from_the_built_in_ring(tmp_path: Path):
    done = run_cli("generate", "collective", "-o", str(tmp_path / "ar"), "--compare", str(_ring_of(8, tmp_path)))

    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0 and "ASTRA-sim's built-in ring 96,365 ns (-6,191 ns)" in said
    assert "crosses the memory bus (10 ns)" in said and "whole µs" in said
