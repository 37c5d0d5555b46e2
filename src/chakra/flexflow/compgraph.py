"""FlexFlow's parallel computation graph (``--compgraph FILE`` with ``--include-costs-dot-graph``).

``Graph::export_strategy_computation_graph`` writes a DOT record per operator:
``{ TYPE_GUID | GUID | { META } | { DEVICE IDS } | { fwd | bwd | sync | secs } | { F | B | S } |
{ in | out | weight | bytes } | { I | O | W } }``. META is ``{ dim | degree }`` for the parallel
operators (Repartition, Combine, Replicate, Reduction) and each dimension's partition degree for
the others; DEVICE IDS are the operator's machine view; the cost rows (with the costs option) are
milliseconds despite their ``secs`` heading, and bytes per partition. A node without a record (the
graph written before the search, ``label=Dense_5``) places nothing.

:func:`read_compgraph` returns each operator's :class:`CompOp`: its devices, its partitioning, and
its bytes, which size the transfers of a task graph (:mod:`chakra.flexflow.placement`).

Example:
    ops = read_compgraph("mlp.compgraph.dot")
    ops["Dense_5"].device_ids, ops["Dense_5"].out_bytes
"""

from __future__ import annotations

from dataclasses import dataclass

from chakra.errors import PathLike
from chakra.flexflow.dot import DotGraph, parse_record, position_error, read_dot
from chakra.flexflow.strategy import MAX_DEVICES
from chakra.table import MAX_COMM_BYTES, MAX_DUR_NS
from chakra.units import NS_PER_MS

#: The longest cost a node can take, in the file's ms: the node table's longest duration.
MAX_COST_MS = MAX_DUR_NS / NS_PER_MS

#: FlexFlow's parallel operators: they move data between partitionings.
PARALLEL_OPS = frozenset({"Repartition", "Combine", "Replicate", "Reduction"})
#: The headings of the cost rows.
RUNTIME_ROW, MEMORY_ROW = "fwd", "in"
NOT_APPLICABLE = "N/A"


@dataclass(frozen=True)
class CompOp:
    """One operator of the computation graph. Times in ms, sizes in bytes per partition (``None``
    without the costs option); ``dims`` the partition degrees, or ``(dim, degree)`` of a parallel op."""

    name: str
    op_type: str
    guid: int
    dims: tuple[int, ...]
    device_ids: tuple[int, ...]
    forward_ms: float | None = None
    backward_ms: float | None = None
    sync_ms: float | None = None
    in_bytes: int | None = None
    out_bytes: int | None = None
    weight_bytes: int | None = None

    @property
    def is_parallel_op(self) -> bool:
        return self.op_type in PARALLEL_OPS


def read_compgraph(path: PathLike) -> dict[str, CompOp]:
    return compgraph_of(read_dot(path))


def compgraph_of(dot: DotGraph) -> dict[str, CompOp]:
    ops: dict[str, CompOp] = {}
    for node in dot.nodes:
        label = node.attrs.get("label", "")
        if "{" not in label:
            continue
        try:
            fields = parse_record(label)
        except ValueError:
            raise position_error(
                dot.path, node.line, node.column, f"the label of {node.name} has unbalanced braces"
            ) from None
        if len(fields) < 4 or not all(isinstance(f, str) for f in fields[:2]):
            raise position_error(
                dot.path, node.line, node.column,
                f"the label of {node.name} is not FlexFlow's {{ OP | GUID | {{ META }} | {{ DEVICES }} ... }}",
            )  # fmt: skip
        name, guid_text = fields[0], fields[1]
        op_type = name.rsplit("_", 1)[0] if "_" in name else name
        try:
            guid = int(guid_text)
            meta = [] if fields[2] == NOT_APPLICABLE else [int(x) for x in _row(fields[2])]
            devices = tuple(int(x) for x in _row(fields[3]))
        except (TypeError, ValueError):
            raise position_error(
                dot.path, node.line, node.column, f"{node.name}: its guid, partitioning and devices are not integers"
            ) from None
        if any(not 0 <= d <= MAX_DEVICES for d in devices):
            raise position_error(dot.path, node.line, node.column, f"{node.name} names a device beyond {MAX_DEVICES:,}")
        costs = _cost_rows(fields[4:])
        try:
            runtime = [float(x) for x in costs.get(RUNTIME_ROW, [])]
            memory = [int(float(x)) for x in costs.get(MEMORY_ROW, [])]
        except (ValueError, OverflowError):
            raise position_error(dot.path, node.line, node.column, f"{node.name}: a cost is not a number") from None
        if any(not 0 <= size <= MAX_COMM_BYTES for size in memory) or any(not 0 <= ms <= MAX_COST_MS for ms in runtime):
            raise position_error(
                dot.path, node.line, node.column,
                f"{node.name}: a cost is negative or past what a node holds ({MAX_COMM_BYTES:,} bytes, 2^62 ns)",
            )  # fmt: skip
        ops[name] = CompOp(
            name, op_type, guid, tuple(meta), devices,
            *(runtime + [None] * (3 - len(runtime)))[:3],  # type: ignore[arg-type]
            *(memory + [None] * (3 - len(memory)))[:3],  # type: ignore[arg-type]
        )  # fmt: skip
    return ops


def _row(field: object) -> list[str]:
    if isinstance(field, str):
        return [field] if field else []
    if isinstance(field, list) and all(isinstance(x, str) for x in field):
        return list(field)
    raise ValueError("nested row")


def _cost_rows(fields: list) -> dict[str, list[str]]:  # type: ignore[type-arg]
    """Each cost row under its heading's first word (``fwd``, ``in``)."""
    rows: dict[str, list[str]] = {}
    for heading, values in zip(fields[::2], fields[1::2], strict=False):
        if isinstance(heading, list) and heading and isinstance(values, list):
            rows[heading[0]] = [v for v in values if isinstance(v, str)]
    return rows
