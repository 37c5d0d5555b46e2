"""``--target custom-collective``: what ASTRA-sim's custom collectives (``CustomAlgorithm``) need of
the per-rank ETs of an algorithm (:mod:`chakra.sim.custom` runs them the same way).

Per rank: only SEND, RECV and COMP nodes (any other node is never finished: the collective hangs),
and a ``comm_tag`` on every SEND and RECV (the feeder throws without one). Across ranks: every peer
an algorithm rank of the files (one beyond them is read past the group's member list), and, where
the files' metadata names the collective and its size (``chakra generate collective`` writes both),
every rank receiving at least what that collective must bring it; sends without their receive are
the workload checks' ``unmatched-p2p``.
"""

from __future__ import annotations

import numpy as np

from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, NodeType
from chakra.table import MISSING, NodeTable
from chakra.validate.findings import ERROR, WARNING, Collector
from chakra.validate.rank import RankSummary

#: The node types a custom algorithm runs.
CUSTOM_NODE_TYPES = (COMM_SEND_NODE, COMM_RECV_NODE, COMP_NODE)
#: Collective names of the metadata (the generator's and MSCCL's spellings) -> the share of the
#: collective's size every rank must receive from the others at least: ``(n - 1) / n`` of the
#: buffer (all-gather: ``n - 1`` parts of its size).
_ALL_GATHER = ("all-gather", "allgather")
_SHARE_OF_BUFFER = ("all-reduce", "allreduce", "reduce-scatter", "reducescatter", "all-to-all", "alltoall")


def check_custom_rank(table: NodeTable, out: Collector, summary: RankSummary) -> None:
    """The per-rank checks, and what the cross-rank ones need into ``summary``."""
    types = table.node_type
    other = np.flatnonzero(~np.isin(types, CUSTOM_NODE_TYPES))
    if len(other):
        pos = int(other[0])
        kind = int(types[pos])
        name = NodeType.Name(kind) if kind in NodeType.values() else str(kind)
        out.add(
            ERROR,
            "custom-node-type",
            f"{len(other)} nodes are neither SEND, RECV nor COMP (the first: {name}): ASTRA-sim's custom "
            "algorithm never finishes them and the collective hangs",
            int(table.ids[pos]),
            hint="a custom algorithm holds COMM_SEND_NODE, COMM_RECV_NODE and COMP_NODE nodes only",
        )
    comm = table.comm
    untagged = np.flatnonzero(comm.tag == MISSING)
    if len(untagged):
        pos = int(comm.pos[untagged[0]])
        out.add(
            ERROR,
            "custom-missing-tag",
            f"{len(untagged)} sends and receives have no comm_tag: ASTRA-sim's feeder throws on them",
            int(table.ids[pos]),
            hint="give every SEND and RECV its comm_tag (the channel of the message)",
        )
    peers = np.where(types[comm.pos] == COMM_SEND_NODE, comm.dst, comm.src)
    peers = peers[peers != MISSING]
    summary.highest_peer = int(peers.max()) if len(peers) else -1
    received = comm.size[(types[comm.pos] == COMM_RECV_NODE) & (comm.size != MISSING)]
    summary.received_bytes = int(received.sum())
    attrs = {attr.name: attr for attr in table.metadata.attr}
    if "collective" in attrs and "size_bytes" in attrs:
        summary.collective = (attrs["collective"].string_val, int(attrs["size_bytes"].int64_val))


def custom_cross_rank(summaries: dict[int, RankSummary], ranks: int, out: Collector) -> None:
    """Peers outside the algorithm's ranks, and ranks receiving less than the collective needs."""
    for rank, summary in sorted(summaries.items()):
        if summary.highest_peer >= ranks:
            out.add(
                ERROR,
                "custom-peer-outside",
                f"rank {rank} exchanges with algorithm rank {summary.highest_peer}, but the algorithm has {ranks} "
                "rank files: ASTRA-sim reads past the group's member list",
                hint="write a file per rank of the group, or keep every peer below the rank count",
            )
    for rank, summary in sorted(summaries.items()):
        if summary.collective is None:
            continue
        name, size = summary.collective
        if name in _ALL_GATHER:
            needed = (ranks - 1) * size
        elif name in _SHARE_OF_BUFFER:
            needed = (ranks - 1) * size // ranks
        else:
            continue
        if summary.received_bytes < needed:
            out.add(
                WARNING,
                "custom-bytes-short",
                f"rank {rank} receives {summary.received_bytes:,} bytes, less than the {needed:,} a {name} of "
                f"{size:,} bytes over {ranks} ranks must bring it: the algorithm cannot produce the collective",
                hint="check the messages' comm_size against the collective's size",
            )
