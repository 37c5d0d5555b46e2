"""Communication stays communication (issue 15): the time a gloo work op spends moving bytes is its
collective node's, not a CPU compute node's, and the small ATen ops inside the work op (packing
and unpacking its buffers) stay CPU ops. Checked on a recorded 2-rank gloo job (``tests/data/gloo``:
shares of measured time are judged on a fixed recording, not a live one on a loaded machine)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from chakra.analyze.breakdown import COMMUNICATION, breakdown
from chakra.pytorch.workload import convert_workload
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMP_NODE
from chakra.table import NodeTable, load_table

#: The collectives whose gloo work op is checked: all-gather has ops inside it, the others none.
WORK_OPS = ("gloo:all_gather", "gloo:all_reduce", "gloo:broadcast")
#: Share of a work op's own time (its span less the ops inside it) its collective node must carry:
#: the stretches before the first and after the last inner op are the op starting and returning.
MIN_COMM_SHARE = 0.8


#: The recorded job (see its README).
RECORDING = Path(__file__).resolve().parent / "data" / "gloo"


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("comm_time") / "job"
    convert_workload(str(RECORDING / "host.{rank}.json.gz"), str(RECORDING / "device.{rank}.json.gz"), out, workers=1)
    return out


def _own_time_us(rank: int, name: str) -> float:
    """What the Kineto trace says the work ops called ``name`` spent outside their inner ops (µs)."""
    with gzip.open(RECORDING / f"device.{rank}.json.gz", "rt") as handle:
        events = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    total = 0.0
    for op in (e for e in events if e["name"] == name):
        end = op["ts"] + op["dur"]
        inner = [
            e for e in events
            if e is not op and e.get("tid") == op.get("tid") and e.get("pid") == op.get("pid")
            and op["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end
        ]  # fmt: skip
        total += op["dur"] - sum(e["dur"] for e in inner if not any(o is not e and _inside(e, o) for o in inner))
    return total


def _inside(event: dict, outer: dict) -> bool:
    return outer["ts"] <= event["ts"] and event["ts"] + event["dur"] <= outer["ts"] + outer["dur"]


def _nodes_named(table: NodeTable, name: str) -> list[int]:
    return [i for i, n in enumerate(table.names) if n == name]


@pytest.mark.parametrize("name", WORK_OPS)
def test_a_gloo_work_ops_time_is_its_collectives(name: str, converted: Path):
    for rank in (0, 1):
        table = load_table(f"{converted}.{rank}.et")
        positions = _nodes_named(table, name)
        comm_us = sum(table.dur_ns[i] for i in positions if table.graph.node_type[i] == COMM_COLL_NODE) / 1000
        own_us = _own_time_us(rank, name)
        assert own_us > 0, f"the job issued no {name}"
        assert comm_us >= MIN_COMM_SHARE * own_us, (rank, name, comm_us, own_us)


def test_the_ops_inside_a_work_op_stay_cpu_ops(converted: Path):
    table = load_table(f"{converted}.0.et")
    inner = [i for i, n in enumerate(table.names) if n in ("aten::copy_", "aten::empty", "aten::view")]
    assert inner and all(table.graph.node_type[i] == COMP_NODE for i in inner)


def test_the_breakdown_counts_the_wire_time_as_communication(converted: Path):
    table = load_table(f"{converted}.0.et")
    gathers = _nodes_named(table, "gloo:all_gather")
    cpu_gather_us = sum(table.dur_ns[i] for i in gathers if table.category[i] != COMMUNICATION) / 1000
    assert cpu_gather_us < (1 - MIN_COMM_SHARE) * _own_time_us(0, "gloo:all_gather")
    assert breakdown(table).communication_ns > 0
