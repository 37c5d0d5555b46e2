"""``chakra validate --target custom-collective`` and ``chakra info`` on the per-rank ETs of a custom
collective algorithm (:mod:`chakra.validate.custom`, issue 32)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import require_shared, run_cli

from chakra import io
from chakra.generate.collective import AlgorithmSpec, write_algorithm
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMM_RECV_NODE
from chakra.trace import new_node

MIB = 1 << 20


def _codes(prefix: Path) -> tuple[int, set[str]]:
    done = run_cli("validate", str(prefix), "--target", "custom-collective", "--json")
    report = json.loads(done.stdout)
    return done.returncode, {finding["code"] for file in report["files"] for finding in file["findings"]}


def _algorithm(tmp_path: Path, ranks: int = 8) -> Path:
    prefix = tmp_path / "algo" / "ring"
    write_algorithm(prefix, AlgorithmSpec("ring", "all-reduce", ranks, MIB))
    return prefix


def _rewrite(path: Path, change) -> None:
    metadata, nodes = io.read(path)
    io.write(path, metadata, change(nodes))


def test_a_generated_algorithm_passes(tmp_path: Path):
    assert _codes(_algorithm(tmp_path)) == (0, set())


def test_an_algorithm_with_fewer_rank_files_than_its_peers_is_an_error(tmp_path: Path):
    prefix = _algorithm(tmp_path)
    for rank in (5, 6, 7):
        prefix.with_name(f"ring.{rank}.et").unlink()

    returncode, codes = _codes(prefix)

    assert returncode == 1 and "custom-peer-outside" in codes


def test_a_receive_taken_out_leaves_a_send_without_its_receive(tmp_path: Path):
    prefix = _algorithm(tmp_path)
    _rewrite(prefix.with_name("ring.3.et"), lambda nodes: [n for n in nodes if n.type != COMM_RECV_NODE or n.id != 1])

    returncode, codes = _codes(prefix)

    assert returncode == 1 and "unmatched-p2p" in codes


def test_messages_too_small_for_the_collective_leave_every_rank_short_of_bytes(tmp_path: Path):
    prefix = _algorithm(tmp_path)

    def quarter(nodes):
        for node in nodes:
            for attr in node.attr:
                if attr.name == "comm_size":
                    attr.int64_val //= 4
        return nodes

    for rank in range(8):
        _rewrite(prefix.with_name(f"ring.{rank}.et"), quarter)

    returncode, codes = _codes(prefix)

    assert returncode == 0 and codes == {"custom-bytes-short"}  # a warning: the files still run


def test_a_collective_node_in_an_algorithm_is_an_error(tmp_path: Path):
    prefix = _algorithm(tmp_path, ranks=4)
    _rewrite(prefix.with_name("ring.0.et"), lambda nodes: [*nodes, new_node(99, "ar", COMM_COLL_NODE, comm_size=1)])

    returncode, codes = _codes(prefix)

    assert returncode == 1 and "custom-node-type" in codes


def test_info_shows_a_whole_program_in_its_metadata_as_one_line_and_whole_in_json():
    example = require_shared(Path("..") / "astra-sim" / "examples" / "system" / "custom_collectives"
                             / "custom_ring_allreduce_8npus_1MB" / "custom_allreduce.0.et")  # fmt: skip

    table = run_cli("info", str(example))
    as_json = run_cli("info", str(example), "--json")

    line = next(line for line in table.stdout.splitlines() if "metadata.input_file" in line)
    assert "characters" in table.stdout and "--json shows it whole" in table.stdout
    assert len(table.stdout.splitlines()) < 60 and "<algo" in line
    assert json.loads(as_json.stdout)[0]["metadata"]["input_file"].count("<step") == 8 * 28
