"""What one rank replays: its nodes in issue order, as compact arrays read from the node table.

:func:`issue_program` orders a rank's node table (:mod:`chakra.table`, as :func:`chakra.open` loads
it) as the format's consumers issue it: a node is issued once every node it depends on (data and
ctrl deps) has been, ascending id among the ready ones (:func:`chakra.graph.topological_order` with
``TieBreak.ID``, ASTRA-sim's order). Each position carries what the replay needs: its kind (compute,
collective, send, receive, or nothing to do), recorded duration (ns), FLOPs and bytes, and for
communication its type, ``comm_size``, group id, peer and tag (:data:`chakra.table.MISSING` where
absent), and its track (:attr:`chakra.table.NodeTable.track`: the recorded thread or stream, else
its slot's fallback, ``CPU`` or ``GPU compute``), which a compute node occupies while it runs.

The simulator reads the same table into its own arrays (:mod:`chakra.sim.program`: positions in id
order with child lists, for an event loop), the replay into these (issue order with parent lists,
for issuers that walk one step at a time): both from the one table, neither from the file.

Example:
    program = issue_program(chakra.open("out/job").table(0))
    len(program), program.recorded_span_us
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from chakra.graph import TieBreak, topological_order
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE
from chakra.table import COMPUTE, DEFAULT_GROUP_ID, MISSING, NodeTable
from chakra.units import NS_PER_US


class Kind(IntEnum):
    """What replaying a node does."""

    NOTHING = 0  # metadata, memory nodes, nodes of unknown type: dependencies only
    COMPUTE = 1
    COLLECTIVE = 2
    SEND = 3
    RECV = 4


@dataclass
class IssueProgram:
    """One rank's nodes in issue order (arrays indexed by issue step; ``parents`` as CSR)."""

    path: str
    ids: np.ndarray
    names: list[str]
    kind: np.ndarray
    dur_ns: np.ndarray
    num_ops: np.ndarray
    tensor_size: np.ndarray
    comm_type: np.ndarray
    comm_size: np.ndarray
    group: np.ndarray
    peer: np.ndarray
    tag: np.ndarray
    track: np.ndarray
    track_names: list[str]
    parent_ptr: np.ndarray
    parent_step: np.ndarray
    recorded_span_us: float | None

    def __len__(self) -> int:
        return len(self.ids)

    def parents(self, step: int) -> np.ndarray:
        """Issue steps of the nodes the node at ``step`` depends on."""
        return self.parent_step[self.parent_ptr[step] : self.parent_ptr[step + 1]]


def replayed_group(group_id: int, defined: Container[int]) -> int:
    """The group a replay issues a collective recorded on ``group_id`` on: that group where the
    workload defines it (``defined``: its group ids), else every rank (:data:`DEFAULT_GROUP_ID`).

    >>> replayed_group(3, {3, 4}), replayed_group(7, {3, 4}), replayed_group(MISSING, {3, 4})
    (3, -1, -1)
    """
    if group_id in (DEFAULT_GROUP_ID, MISSING) or group_id not in defined:
        return DEFAULT_GROUP_ID
    return group_id


def issue_program(table: NodeTable) -> IssueProgram:
    """The program of one rank's node table, in issue order (module docstring)."""
    graph = table.graph
    order = topological_order(graph, tie_break=TieBreak.ID, path=table.path)
    step_of = np.empty(len(order), dtype=np.int64)
    step_of[order] = np.arange(len(order), dtype=np.int64)
    n = len(order)
    kind = np.full(n, Kind.NOTHING, dtype=np.int8)
    kind[table.category[order] == COMPUTE] = Kind.COMPUTE
    comm_type = np.full(n, MISSING, dtype=np.int64)
    comm_size = np.full(n, MISSING, dtype=np.int64)
    group = np.full(n, MISSING, dtype=np.int64)
    peer = np.full(n, MISSING, dtype=np.int64)
    tag = np.full(n, MISSING, dtype=np.int64)
    comm = table.comm
    at = step_of[comm.pos]
    types = table.node_type[comm.pos]
    kind[at[types == COMM_COLL_NODE]] = Kind.COLLECTIVE
    kind[at[types == COMM_SEND_NODE]] = Kind.SEND
    kind[at[types == COMM_RECV_NODE]] = Kind.RECV
    comm_type[at], comm_size[at], group[at], tag[at] = comm.kind, comm.size, comm.group, comm.tag
    peer[at] = np.where(types == COMM_SEND_NODE, comm.dst, comm.src)
    # the CSR of parents, re-indexed by issue step
    counts = np.diff(graph.dep_ptr)[order]
    parent_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=parent_ptr[1:])
    # every edge of the nodes in issue order, gathered in one vectorized step (not a slice per node)
    edge = np.repeat(graph.dep_ptr[order] - parent_ptr[:-1], counts) + np.arange(parent_ptr[-1], dtype=np.int64)
    parent_step = step_of[graph.dep_pos[edge]]
    names = table.names
    starts = table.start_us.astype(np.float64)
    timed = starts > 0
    span = None
    if timed.any():
        ends = starts + table.dur_ns / NS_PER_US
        span = float(ends[timed].max() - starts[timed].min())
    return IssueProgram(
        table.label,
        graph.ids[order],
        [names[i] for i in order.tolist()],
        kind,
        table.dur_ns[order].astype(np.int64),
        table.num_ops[order].astype(np.int64),
        table.tensor_size[order].astype(np.int64),
        comm_type,
        comm_size,
        group,
        peer,
        tag,
        table.track[order].astype(np.int64),
        list(table.track_names),
        parent_ptr,
        parent_step,
        span,
    )
