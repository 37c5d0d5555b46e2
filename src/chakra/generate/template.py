"""Build one rank's graph once, write it for every equivalent rank.

Ranks that play the same part (the same pipeline stage of a data/tensor-parallel job) have the same
nodes; only the communicator of each collective (``pg_name``) and the peers of sends and receives
differ. A :class:`RankTemplate` holds such a graph with those values left open: collectives name a
group *kind* (``"tp"``, ``"dpcp"``, ...) and point-to-point nodes a peer *offset*. Rendering a rank
(:meth:`FrozenTemplate.render`; :class:`chakra.workload_writer.WorkloadWriter` writes the bytes) copies the
pre-serialized bytes of every other node and encodes only the open attributes, so a thousand ranks
cost little more than one (``reference/workload-generators.md`` §6.3).

The bytes are exactly what ``io.write`` would produce for the filled-in nodes: the open attributes are
the last ``attr`` entries of their node, and ``attr`` is the last field of ``Node``, so appending them
to the node's serialized prefix is the canonical encoding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from chakra.attrs import set_attr
from chakra.io import FORMAT_VERSION, encode_varint, frame
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    GlobalMetadata,
    Node,
)
from chakra.trace import new_node

#: Static nodes are framed into chunks of about this many bytes before joining.
_CHUNK_NODES = 4096


@dataclass
class _Open:
    """A node whose last attributes are filled in per rank: ``kind`` is a group kind (collective) or
    ``"send"``/``"recv"`` with the peer ``offset`` (in ranks)."""

    prefix: bytes
    kind: str
    offset: int = 0


@dataclass
class RankTemplate:
    """The nodes of one representative rank, ids dense from 0 in the order they are added.

    Example:
        >>> from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE
        >>> t = RankTemplate()
        >>> a = t.compute("gemm", num_ops=2 * 64**3, tensor_size=3 * 2 * 64**2, duration_us=1)
        >>> t.collective("grad.allreduce", comm_type=ALL_REDUCE, size_bytes=1 << 20, group="dpcp", deps=[a])
        1
    """

    nodes: list[Node] = field(default_factory=list)
    open_kinds: dict[int, tuple[str, int]] = field(default_factory=dict)

    def _node(self, name: str, node_type: int, deps: Sequence[int], ctrl: Sequence[int]) -> Node:
        node = new_node(len(self.nodes), name, node_type, data_deps=deps, ctrl_deps=ctrl)
        self.nodes.append(node)
        return node

    def compute(
        self,
        name: str,
        *,
        num_ops: int,
        tensor_size: int,
        duration_us: int,
        deps: Sequence[int] = (),
        ctrl: Sequence[int] = (),
    ) -> int:
        """A GPU compute node with ``num_ops`` FLOPs and ``tensor_size`` bytes; returns its id."""
        node = self._node(name, COMP_NODE, deps, ctrl)
        if duration_us:
            node.duration_micros = duration_us
        set_attr(node, "is_cpu_op", False)
        set_attr(node, "num_ops", max(int(num_ops), 1))  # 0 makes ASTRA-sim's roofline divide 0 by 0
        set_attr(node, "tensor_size", max(int(tensor_size), 1))  # 0 makes ASTRA-sim drop the node
        return node.id

    def collective(
        self,
        name: str,
        *,
        comm_type: int,
        size_bytes: int,
        group: str,
        deps: Sequence[int] = (),
        ctrl: Sequence[int] = (),
    ) -> int:
        """A collective in the rank's ``group`` kind (``pg_name`` filled in per rank)."""
        node = self._node(name, COMM_COLL_NODE, deps, ctrl)
        set_attr(node, "is_cpu_op", False)
        set_attr(node, "comm_type", comm_type)
        set_attr(node, "comm_size", int(size_bytes))
        self.open_kinds[node.id] = (group, 0)
        return node.id

    def p2p(
        self,
        name: str,
        *,
        send: bool,
        size_bytes: int,
        peer_offset: int,
        tag: int,
        deps: Sequence[int] = (),
        ctrl: Sequence[int] = (),
    ) -> int:
        """A SEND to (or RECV from) the rank ``peer_offset`` away; ``comm_src``/``comm_dst`` per rank."""
        node = self._node(name, COMM_SEND_NODE if send else COMM_RECV_NODE, deps, ctrl)
        set_attr(node, "is_cpu_op", False)
        set_attr(node, "comm_size", int(size_bytes))
        set_attr(node, "comm_tag", tag)
        self.open_kinds[node.id] = ("send" if send else "recv", peer_offset)
        return node.id

    def __len__(self) -> int:
        return len(self.nodes)

    def freeze(self, metadata: GlobalMetadata | None = None) -> FrozenTemplate:
        """Serialize once: runs of static nodes become framed bytes, open nodes keep their prefix."""
        meta = metadata if metadata is not None else GlobalMetadata(version=FORMAT_VERSION)
        parts: list[bytes | _Open] = [frame(meta.SerializeToString())]
        run: list[bytes] = []
        for node in self.nodes:
            opened = self.open_kinds.get(node.id)
            if opened is None:
                run.append(frame(node.SerializeToString()))
                if len(run) >= _CHUNK_NODES:
                    parts.append(b"".join(run))
                    run = []
                continue
            if run:
                parts.append(b"".join(run))
                run = []
            parts.append(_Open(node.SerializeToString(), opened[0], opened[1]))
        if run:
            parts.append(b"".join(run))
        return FrozenTemplate(parts, len(self.nodes))


@dataclass
class FrozenTemplate:
    """A serialized :class:`RankTemplate`; :meth:`render` fills in one rank."""

    parts: list[bytes | _Open]
    node_count: int
    _cache: dict[tuple[str, int], bytes] = field(default_factory=dict)

    def _attr(self, name: str, value: int) -> bytes:
        key = (name, value)
        found = self._cache.get(key)
        if found is None:
            # a node holding only this attribute encodes as exactly its ``attr`` field, in the value
            # kind consumers read (chakra.attrs)
            holder = Node()
            set_attr(holder, name, str(value) if name == "pg_name" else value)
            found = self._cache[key] = holder.SerializeToString()
        return found

    def render(self, rank: int, group_id: Callable[[str, int], int]) -> bytes:
        """The whole file of ``rank``; ``group_id(kind, rank)`` gives the communicator id of a kind."""
        out: list[bytes] = []
        append = out.append
        attr = self._attr
        for part in self.parts:
            if isinstance(part, bytes):
                append(part)
                continue
            if part.kind == "send":
                extra = attr("comm_src", rank) + attr("comm_dst", rank + part.offset)
            elif part.kind == "recv":
                extra = attr("comm_src", rank + part.offset) + attr("comm_dst", rank)
            else:
                extra = attr("pg_name", group_id(part.kind, rank))
            append(encode_varint(len(part.prefix) + len(extra)))
            append(part.prefix)
            append(extra)
        return b"".join(out)
