"""``chakra convert msccl``: MSCCL XML programs -> the per-rank ETs of a custom collective, as
ASTRA-sim's collectiveapi converter writes them (:mod:`chakra.msccl`, issue 32)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import require_shared, run_cli

from chakra import io
from chakra.errors import ChakraInputError
from chakra.msccl import convert_msccl

MIB = 1 << 20
#: Two GPUs: a send after a nop that carries a dependency on another threadblock, a receive-reduce-copy
#: that waits for a step of the first threadblock, a fused receive-reduce-send (tests/data/msccl).
TWO_THREADBLOCKS = (Path(__file__).resolve().parent / "data" / "msccl" / "two_threadblocks.xml").read_text()


def _example() -> Path:
    return require_shared(Path("..") / "astra-sim" / "examples" / "system" / "custom_collectives"
                          / "custom_ring_allreduce_8npus_1MB")  # fmt: skip


def _program(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "program.xml"
    path.write_text(text)
    return path


def test_astra_sims_example_program_gives_its_example_files_node_by_node(tmp_path: Path):
    example = _example()
    conversion = convert_msccl(example / "custom_allreduce.xml", tmp_path / "ring", MIB, "allreduce")

    assert conversion.ranks == 8
    for rank in range(8):
        theirs_metadata, theirs = io.read(example / f"custom_allreduce.{rank}.et")
        ours_metadata, ours = io.read(tmp_path / f"ring.{rank}.et")
        assert ours == theirs and ours_metadata == theirs_metadata


def test_node_ids_count_every_step_and_dependencies_come_in_the_converters_order(tmp_path: Path):
    convert_msccl(_program(tmp_path, TWO_THREADBLOCKS), tmp_path / "t", MIB)

    nodes = {node.id: node for node in io.read(tmp_path / "t.0.et")[1]}
    # id 1 is the nop's; the rrc is a receive (4) and its reduction (5)
    assert sorted(nodes) == [0, 2, 3, 4, 5]
    # the send after the nop: the rrc's reduction it names, the receive the nop carried, the step before
    assert nodes[2].name == "COMM_SEND_NODE_tb0_step2" and list(nodes[2].data_deps) == [5, 3, 0]
    assert list(nodes[4].data_deps) == [0, 3] and list(nodes[5].data_deps) == [4]
    sizes = {node.id: attr.int64_val for node in nodes.values() for attr in node.attr if attr.name == "comm_size"}
    assert sizes == {0: 2 * MIB // 4, 2: MIB // 4, 3: MIB // 4, 4: MIB // 4}


def test_a_fused_receive_reduce_send_step_becomes_its_three_parts(tmp_path: Path):
    convert_msccl(_program(tmp_path, TWO_THREADBLOCKS), tmp_path / "t", MIB)

    nodes = io.read(tmp_path / "t.1.et")[1]
    assert [node.name for node in nodes] == [
        "COMM_RECV_NODE_tb0_step0", "COMM_RECV_NODE_tb0_step1", "COMP_NODE_tb0_step1", "COMM_SEND_NODE_tb0_step1"
    ]  # fmt: skip
    assert [list(node.data_deps) for node in nodes] == [[], [0], [1], [2]]


def test_the_command_writes_a_file_per_gpu(tmp_path: Path):
    done = run_cli("convert", "msccl", str(_example() / "custom_allreduce.xml"), "-o", str(tmp_path / "algo"),
                   "--size", "1MiB")  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == [f"algo.{rank}.et" for rank in range(8)]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('<algo name="x" coll="allreduce"></algo>', "no <gpu> elements"),
        ('<algo coll="allreduce"><gpu id="0"', "line 1, column"),
        (
            '<algo coll="allreduce"><gpu id="0" i_chunks="1"><tb id="0" send="1" recv="-1" chan="0">'
            '<step s="0" type="s" cnt="1" depid="3" deps="0"/></tb></gpu></algo>',
            "depends on <tb id=3> step 0",
        ),
        (
            '<algo coll="allreduce"><gpu id="0" i_chunks="1"><tb id="0" send="1" recv="-1" chan="0">'
            '<step s="0" type="xyz" cnt="1"/></tb></gpu></algo>',
            "has type 'xyz'",
        ),
    ],
)
def test_a_program_that_cannot_be_converted_is_one_line_naming_the_file(tmp_path: Path, text: str, why: str):
    path = _program(tmp_path, text)

    done = run_cli("convert", "msccl", str(path), "-o", str(tmp_path / "out" / "a"), "--size", "1MiB")

    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert str(path) in done.stderr and why in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_size_of_no_bytes_is_refused():
    with pytest.raises(ChakraInputError, match="0 bytes"):
        convert_msccl(_example() / "custom_allreduce.xml", "unused/prefix", 0)
