"""The microbenchmark families: what each builds from :class:`MicroParams` (ranks, compute time,
sizes), one function per family returning a :class:`MicroWorkload` (every rank's node list), and the node
builders they share. :mod:`chakra.generate.micro` lists them (``FAMILIES``), sweeps and writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chakra.attrs import set_attr
from chakra.errors import ChakraInputError
from chakra.generate.micro_defaults import (
    DEFAULT_CHAIN_LENGTH,
    DEFAULT_COMM_SIZE_BYTES,
    DEFAULT_NUM_NPUS,
    DEFAULT_RUNTIME_US,
    DEFAULT_TENSOR_SIZE_BYTES,
)
from chakra.generate.sizes import SIZE_HINT
from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    MEM_LOAD_NODE,
    MEM_STORE_NODE,
    METADATA_NODE,
    AttributeProto,
    CollectiveCommType,
    Node,
    NodeType,
)
from chakra.trace import new_node
from chakra.units import FLOPS_PER_TFLOPS, US_PER_S
from chakra.validate import ASTRA_UNSUPPORTED_COLLECTIVES

# The defaults of MicroParams (upstream chakra_generator's flags) are in chakra.generate.micro_defaults,
# which the CLI imports without this module's imports; importable from here as before.
#: Upstream writes its BARRIER with comm_size 0: a barrier moves no data.
BARRIER_SIZE_BYTES = 0

#: Collectives and point-to-point transfers need a peer, and ASTRA-sim's networks need more than
#: one NPU per dimension (astra-sim.md §4.2).
MIN_NPUS = 2
#: ``num_ops`` of a compute node is what runs ``runtime_us`` at this peak: 900 TFLOPS is
#: ``peak-perf`` of ASTRA-sim's example system configs (astra-sim.md §4.1, examples/astra/system.json),
#: so replay and roofline agree there.
REFERENCE_PEAK_TFLOPS = 900.0
#: ASTRA-sim's all-gather chunk is floor(comm_size / preferred-dataset-splits), zero when the splits
#: exceed the size (astra-sim.md §5.4). Systems split into a few to a few hundred chunks, so below
#: this size a generated all-gather gets a note.
ALL_GATHER_NOTE_BELOW_BYTES = 1 << 10

#: Collective families, in upstream's order, then those upstream lacks.
UPSTREAM_COLLECTIVES = ("ALL_REDUCE", "ALL_TO_ALL", "ALL_GATHER", "REDUCE_SCATTER", "BROADCAST", "BARRIER")
EXTRA_COLLECTIVES = ("REDUCE", "GATHER", "SCATTER")
COLLECTIVE_FAMILIES = UPSTREAM_COLLECTIVES + EXTRA_COLLECTIVES
#: Collectives a size sweep covers: all but BARRIER, which carries no data.
SWEEP_COLLECTIVES = tuple(c for c in COLLECTIVE_FAMILIES if c != "BARRIER")

#: How ``chakra simulate`` models what ASTRA-sim refuses or only replays (chakra.sim.collectives).
SIM_MODELS = {
    "BROADCAST": "a binomial tree",
    "BARRIER": "a dissemination barrier",
    "REDUCE": "a reduce-scatter, then a gather to rank 0",
    "GATHER": "every rank sending its input to rank 0",
    "SCATTER": "rank 0 sending a piece to every rank",
}


# ---------------------------------------------------------------------------------------------
# Parameters and results


@dataclass(frozen=True)
class MicroParams:
    """What every family is built from: ranks, compute time (µs), sizes (bytes), chain length.

    ``peak_tflops`` only sets ``num_ops`` of compute nodes (see :data:`REFERENCE_PEAK_TFLOPS`).
    """

    num_npus: int = DEFAULT_NUM_NPUS
    runtime_us: int = DEFAULT_RUNTIME_US
    tensor_size_bytes: int = DEFAULT_TENSOR_SIZE_BYTES
    comm_size_bytes: int = DEFAULT_COMM_SIZE_BYTES
    chain_length: int = DEFAULT_CHAIN_LENGTH
    peak_tflops: float = REFERENCE_PEAK_TFLOPS

    def __post_init__(self) -> None:
        _check_npus(self.num_npus)
        if self.runtime_us < 1:
            raise ChakraInputError(
                f"runtime must be at least 1 µs, not {self.runtime_us}",
                hint="ASTRA-sim replays 0 µs as 1 ns, and num_ops is derived from the runtime",
            )
        if self.tensor_size_bytes < 1:
            raise ChakraInputError(
                f"tensor size must be at least 1 byte, not {self.tensor_size_bytes}",
                hint="ASTRA-sim skips a roofline compute node whose tensor_size is 0, which can stall the rank",
            )
        if self.comm_size_bytes < 0:
            raise ChakraInputError(f"comm size cannot be negative ({self.comm_size_bytes} bytes)", hint=SIZE_HINT)
        if self.chain_length < 1:
            raise ChakraInputError(f"chain length must be at least 1, not {self.chain_length}")
        if not self.peak_tflops > 0:
            raise ChakraInputError(f"peak must be positive, not {self.peak_tflops} TFLOPS")


@dataclass
class MicroWorkload:
    """One generated workload: ``ranks[r]`` is rank r's node list (ids from 0); ``family`` the
    family it belongs to; ``comm_groups`` ASTRA-sim groups (``{group id: [ranks]}``) or ``None``;
    ``notes`` what consumers will do with it that a user should know."""

    name: str
    family: str
    ranks: list[list[Node]]
    comm_groups: dict[int, list[int]] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def num_ranks(self) -> int:
        return len(self.ranks)


def _check_npus(num_npus: int) -> None:
    if num_npus < MIN_NPUS:
        raise ChakraInputError(
            f"a workload needs at least {MIN_NPUS} ranks, not {num_npus}",
            hint="collectives and send/recv need a peer, and ASTRA-sim networks need 2+ NPUs per dimension",
        )


# ---------------------------------------------------------------------------------------------
# Nodes


def p2p_tag(src_rank: int) -> int:
    """The ``comm_tag`` of a transfer from ``src_rank``: the sending rank, in every family here."""
    return src_rank


def compute_flops(runtime_us: int, peak_tflops: float = REFERENCE_PEAK_TFLOPS) -> int:
    """``num_ops`` of a compute node that runs ``runtime_us`` at ``peak_tflops`` (at least 1: ASTRA-sim's
    roofline divides by it)."""
    return max(1, round(runtime_us * peak_tflops * FLOPS_PER_TFLOPS / US_PER_S))


def _node(node_id: int, name: str, node_type: int, *, deps: Sequence[int] = (), dur_us: int = 0, **attrs: Any) -> Node:
    """A device node (``is_cpu_op`` false, written first as upstream does) with ``attrs`` in canonical kinds."""
    return new_node(node_id, name, node_type, data_deps=deps, duration_us=dur_us, is_cpu_op=False, **attrs)


def _comp(node_id: int, name: str, params: MicroParams, deps: Sequence[int] = ()) -> Node:
    return _node(
        node_id,
        name,
        COMP_NODE,
        deps=deps,
        dur_us=params.runtime_us,
        num_ops=compute_flops(params.runtime_us, params.peak_tflops),
        tensor_size=params.tensor_size_bytes,
    )


def _send(node_id: int, rank: int, dst: int, size_bytes: int) -> Node:
    return _transfer(node_id, f"send_to_{dst}", COMM_SEND_NODE, rank, dst, size_bytes)


def _recv(node_id: int, rank: int, src: int, size_bytes: int) -> Node:
    return _transfer(node_id, f"recv_from_{src}", COMM_RECV_NODE, src, rank, size_bytes)


def _transfer(node_id: int, name: str, node_type: int, src: int, dst: int, size_bytes: int) -> Node:
    """One half of a transfer from ``src`` to ``dst``, tagged by its sender (:func:`p2p_tag`)."""
    return _node(node_id, name, node_type, comm_src=src, comm_dst=dst, comm_tag=p2p_tag(src), comm_size=size_bytes)


def _same_on_every_rank(name: str, params: MicroParams, build: Callable[[], list[Node]], **extra: Any) -> MicroWorkload:
    return MicroWorkload(name, name, [build() for _ in range(params.num_npus)], **extra)


# ---------------------------------------------------------------------------------------------
# Families


#: Sample values of the METADATA family, one per scalar oneof member (list members hold two values).
_SAMPLE_SCALARS: dict[str, Any] = {
    "double_val": 1.5,
    "float_val": 2.5,
    "int32_val": -32,
    "int64_val": -64,
    "uint32_val": 32,
    "uint64_val": 64,
    "sint32_val": -32,
    "sint64_val": -64,
    "fixed32_val": 32,
    "fixed64_val": 64,
    "sfixed32_val": -32,
    "sfixed64_val": -64,
    "bool_val": True,
    "string_val": "string",
    "bytes_val": b"bytes",
}


def _second_sample(value: Any) -> Any:
    """Another value of the same kind, so list attributes hold two different values."""
    if isinstance(value, bool):
        return not value
    return value * 2


def value_kind_members() -> list[str]:
    """Every oneof member of ``AttributeProto.value``, in field order (``double_val``, ``double_list``, ...)."""
    return [f.name for f in AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields]


def one_metadata_node_all_types(params: MicroParams) -> MicroWorkload:
    """A METADATA node per rank with one attribute for every value kind, named after it without
    ``_val`` (``double``, ``double_list``, ..., ``bytes_list``), each documented in ``doc_string``."""

    def build() -> list[Node]:
        node = Node(id=0, name="METADATA_NODE", type=METADATA_NODE)
        for member in value_kind_members():
            scalar = _SAMPLE_SCALARS[member.replace("_list", "_val")]
            value = [scalar, _second_sample(scalar)] if member.endswith("_list") else scalar
            set_attr(node, member.removesuffix("_val"), value, member=member)
            node.attr[-1].doc_string = f"a sample {member}"
        return [node]

    return _same_on_every_rank(
        "one_metadata_node_all_types",
        params,
        build,
        notes=["ASTRA-sim builds with assertions stop on METADATA nodes (their statistics have no class for them)"],
    )


def _memory_family(name: str, node_type: NodeType, params: MicroParams) -> MicroWorkload:
    return _same_on_every_rank(
        name,
        params,
        lambda: [_node(0, NodeType.Name(node_type), node_type, tensor_size=params.tensor_size_bytes)],
        notes=[
            "memory nodes need a remote memory configuration with memory expansion (not NO_MEMORY_EXPANSION) "
            "in ASTRA-sim and chakra simulate; ASTRA-sim then throws from its overlap statistics after the "
            "'finished' line"
        ],
    )


def one_remote_mem_load_node(params: MicroParams) -> MicroWorkload:
    """A MEM_LOAD_NODE per rank loading ``tensor_size_bytes`` from remote memory."""
    return _memory_family("one_remote_mem_load_node", MEM_LOAD_NODE, params)


def one_remote_mem_store_node(params: MicroParams) -> MicroWorkload:
    """A MEM_STORE_NODE per rank storing ``tensor_size_bytes`` to remote memory."""
    return _memory_family("one_remote_mem_store_node", MEM_STORE_NODE, params)


def one_comp_node(params: MicroParams) -> MicroWorkload:
    """A compute node per rank: ``runtime_us`` µs, ``num_ops`` FLOPs, ``tensor_size_bytes`` bytes."""
    return _same_on_every_rank("one_comp_node", params, lambda: [_comp(0, "COMP_NODE", params)])


def two_comp_nodes_independent(params: MicroParams) -> MicroWorkload:
    """Two compute nodes per rank without dependencies (they serialise on the one GPU slot)."""
    return _same_on_every_rank(
        "two_comp_nodes_independent", params, lambda: [_comp(i, f"COMP_NODE_{i}", params) for i in range(2)]
    )


def two_comp_nodes_dependent(params: MicroParams) -> MicroWorkload:
    """Two compute nodes per rank, the second data-depending on the first."""
    return _same_on_every_rank(
        "two_comp_nodes_dependent",
        params,
        lambda: [_comp(0, "COMP_NODE_0", params), _comp(1, "COMP_NODE_1", params, deps=[0])],
    )


def comp_chain(params: MicroParams) -> MicroWorkload:
    """``chain_length`` compute nodes per rank, node ``i`` data-depending on node ``i - 1``."""
    return _same_on_every_rank(
        "comp_chain",
        params,
        lambda: [_comp(i, f"COMP_NODE_{i}", params, deps=[i - 1] if i else []) for i in range(params.chain_length)],
    )


def collective_workload(
    comm_type: str,
    comm_size_bytes: int,
    num_npus: int,
    *,
    runtime_us: int = DEFAULT_RUNTIME_US,
    name: str | None = None,
) -> MicroWorkload:
    """One ``comm_type`` collective (``"ALL_REDUCE"``, ...) of ``comm_size_bytes`` on every rank, on the
    default group (all ranks). BROADCAST also gets ``duration_micros = runtime_us``: ASTRA-sim replays
    it for that long instead of simulating it. ``name`` defaults to the collective's name.

    ``comm_size`` follows ASTRA-sim: the per-rank input for ALL_GATHER and GATHER, the full buffer
    for the others (astra-sim.md §7). Notes say what ASTRA-sim refuses, only replays, or cannot chunk.
    """
    if comm_type not in COLLECTIVE_FAMILIES:
        raise ChakraInputError(
            f"no collective family {comm_type!r}", hint=f"use one of {', '.join(COLLECTIVE_FAMILIES)}"
        )
    _check_npus(num_npus)
    if comm_size_bytes < 0:
        raise ChakraInputError(f"comm size cannot be negative ({comm_size_bytes} bytes)", hint=SIZE_HINT)
    type_value = CollectiveCommType.Value(comm_type)
    dur_us = runtime_us if type_value == CollectiveCommType.BROADCAST else 0
    notes = []
    if type_value in ASTRA_UNSUPPORTED_COLLECTIVES:
        notes.append(
            f"ASTRA-sim stops with 'Unsupported collective comm type' on {comm_type}; "
            f"chakra simulate models it as {SIM_MODELS[comm_type]}"
        )
    elif type_value == CollectiveCommType.BROADCAST:
        notes.append(
            f"ASTRA-sim replays BROADCAST for its duration_micros ({runtime_us} µs) and ignores comm_size; "
            f"chakra simulate models it as {SIM_MODELS[comm_type]}"
        )
    elif type_value == CollectiveCommType.ALL_GATHER and comm_size_bytes < ALL_GATHER_NOTE_BELOW_BYTES:
        notes.append(
            f"an ALL_GATHER of {comm_size_bytes} B per rank gets a zero chunk size in ASTRA-sim (and is refused by "
            f"chakra simulate) when preferred-dataset-splits exceeds {comm_size_bytes}"
        )
    elif comm_size_bytes == 0 and comm_type != "BARRIER":
        notes.append(
            f"a {comm_type} of 0 bytes moves nothing; ASTRA-sim pads it up to preferred-dataset-splits x NPUs "
            "bytes, so it still takes time there"
        )
    ranks = [
        [_node(0, comm_type, COMM_COLL_NODE, dur_us=dur_us, comm_type=type_value, comm_size=comm_size_bytes)]
        for _ in range(num_npus)
    ]
    return MicroWorkload(name or comm_type, comm_type, ranks, notes=notes)


def collective_family(comm_type: str) -> Callable[[MicroParams], MicroWorkload]:
    """The builder of the ``comm_type`` family: :func:`collective_workload` with the family's parameters."""

    def build(params: MicroParams) -> MicroWorkload:
        size = BARRIER_SIZE_BYTES if comm_type == "BARRIER" else params.comm_size_bytes
        return collective_workload(comm_type, size, params.num_npus, runtime_us=params.runtime_us)

    size = f"{BARRIER_SIZE_BYTES} bytes" if comm_type == "BARRIER" else "``comm_size_bytes``"
    build.__doc__ = f"A {comm_type} of {size} on every rank (see :func:`collective_workload`)."
    if CollectiveCommType.Value(comm_type) in ASTRA_UNSUPPORTED_COLLECTIVES:
        build.__doc__ += f" ASTRA-sim refuses {comm_type}; ``chakra simulate`` models it as {SIM_MODELS[comm_type]}."
    return build


def _ring_halves(params: MicroParams, *, sends: bool, recvs: bool, name: str) -> MicroWorkload:
    n = params.num_npus
    size = params.comm_size_bytes
    ranks = []
    for rank in range(n):
        nodes: list[Node] = []
        if sends:
            nodes.append(_send(len(nodes), rank, (rank + 1) % n, size))
        if recvs:
            nodes.append(_recv(len(nodes), rank, (rank - 1) % n, size))
        ranks.append(nodes)
    notes = []
    if not (sends and recvs):
        if sends:
            half = "the sends of a ring, nobody receives them (validate: unmatched-p2p)"
            other = "one_comm_recv_node"
        else:
            half = "the receives of a ring, which wait forever for their sends"
            other = "one_comm_send_node"
        notes.append(
            f"{half}; the matching nodes are in {other} (rank r sends to r+1 mod n with tag r): merge the two "
            "per rank, or use send_recv_ring"
        )
    return MicroWorkload(name, name, ranks, notes=notes)


def one_comm_send_node(params: MicroParams) -> MicroWorkload:
    """A SEND per rank: rank r sends ``comm_size_bytes`` to ``(r + 1) mod n`` with tag r. The matching
    receives are ``one_comm_recv_node``; alone, a simulator completes the sends when their messages
    arrive, but nobody receives them (validation reports them unmatched)."""
    return _ring_halves(params, sends=True, recvs=False, name="one_comm_send_node")


def one_comm_recv_node(params: MicroParams) -> MicroWorkload:
    """A RECV per rank: rank r receives ``comm_size_bytes`` from ``(r - 1) mod n`` with tag r - 1 mod n.
    The matching sends are ``one_comm_send_node``; alone, the receives wait forever."""
    return _ring_halves(params, sends=False, recvs=True, name="one_comm_recv_node")


def send_recv_ring(params: MicroParams) -> MicroWorkload:
    """A ring: rank r sends ``comm_size_bytes`` to ``(r + 1) mod n`` (tag r, node 0) and receives from
    ``(r - 1) mod n`` (tag r - 1 mod n, node 1); no dependencies, so nobody waits on its own receive."""
    return _ring_halves(params, sends=True, recvs=True, name="send_recv_ring")


def send_recv_pair(params: MicroParams) -> MicroWorkload:
    """Pairs: even rank r sends ``comm_size_bytes`` to r + 1 (tag r), which receives it. With an odd
    rank count the last rank has no partner, so it sends to rank 0, which receives that too (node 1)."""
    n = params.num_npus
    size = params.comm_size_bytes
    ranks: list[list[Node]] = [[] for _ in range(n)]
    for src in range(0, n, 2):
        dst = src + 1 if src + 1 < n else 0
        ranks[src].append(_send(len(ranks[src]), src, dst, size))
        ranks[dst].append(_recv(len(ranks[dst]), dst, src, size))
    return MicroWorkload("send_recv_pair", "send_recv_pair", ranks)
