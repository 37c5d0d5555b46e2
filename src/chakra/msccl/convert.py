"""MSCCL XML programs -> per-rank Chakra ETs of SEND, RECV and COMP nodes (custom collectives).

MSCCLang compiles a collective algorithm to an XML program: ``<algo>`` holds a ``<gpu id>`` per rank
with its chunk counts (``i_chunks``, ``o_chunks``), each GPU ``<tb>`` threadblocks (a peer to send to,
one to receive from, a channel), each threadblock ``<step>`` instructions in order (``s`` send, ``r``
receive, ``rrc`` receive-reduce-copy, ``nop``, ...), a step possibly waiting for a step of another
threadblock of its GPU (``depid``, ``deps``). ASTRA-sim's ``collectiveapi`` converter turns it into
the per-rank ETs its custom collectives run; :func:`convert_msccl` writes the same nodes:

* a GPU's file ``PREFIX.{id}.et``; its node ids count the steps in document order (threadblock by
  threadblock) from 0: a step takes one id, ``rrc`` two (its receive, then its reduction), a ``nop``
  one it does not use;
* ``s`` is a ``COMM_SEND_NODE_tb{t}_step{s}`` to the threadblock's ``send`` peer, ``r`` a
  ``COMM_RECV_NODE_tb{t}_step{s}`` from its ``recv`` peer, each of ``cnt`` chunks of
  ``size / i_chunks`` bytes (all-gather and reduce: chunks of ``size``), the tag the channel; ``rrc``
  the receive and a ``COMP_NODE_tb{t}_step{s}`` after it, of ``3 · trunc(bytes / 50)`` ns in whole µs;
* a step's node depends on the step named by ``depid``/``deps`` (a ``rrc``: its reduction), then on
  what the ``nop`` steps just before it waited for (nearest first), then on the threadblock's step
  before it;
* the file's metadata: the converter's ``schema``, the whole XML as ``input_file``, the collective.

Beyond that converter (which fails or drops them silently): the fused steps are written as their
parts -- ``rcs`` a receive then a send, ``rrs`` and ``rrcs`` a receive, its reduction and a send,
``cpy`` and ``re`` a COMP of the copy or reduction (each part an id of its own, so a program with them
numbers its later nodes past the converter's) --, a dependency on a ``nop`` is one on what the
``nop`` waits for (the converter drops it, or fails), and a program it cannot convert (no GPUs, a
dependency on a missing step, ``nop`` steps waiting for each other) is refused in one line naming the
file and the step.

Example:
    conversion = convert_msccl("allreduce_ring.xml", "out/ring", size_bytes=1 << 20)
    conversion.ranks, conversion.nodes_per_rank
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

from chakra import trace, workload_writer
from chakra.errors import ChakraInputError, PathLike
from chakra.generate.collective import reduction_us
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, GlobalMetadata, Node

#: The converter's schema string and its reductions' bandwidth (GB/s: bytes per ns).
SCHEMA = "1.0.2-chakra.0.0.4"
REDUCTION_BW_GBPS = 50.0
#: Collectives whose chunk is the whole size (each rank's part), not ``size / i_chunks``.
WHOLE_SIZE_COLLECTIVES = frozenset({"allgather", "reduce"})
#: What each step type becomes, in order: "send", "recv", "reduce" (a COMP after a receive) or
#: "local" (a COMP of a copy or reduction in the GPU's own memory); nop: nothing.
STEP_PARTS = {
    "s": ("send",),
    "r": ("recv",),
    "rrc": ("recv", "reduce"),
    "rcs": ("recv", "send"),
    "rrs": ("recv", "reduce", "send"),
    "rrcs": ("recv", "reduce", "send"),
    "cpy": ("local",),
    "re": ("local",),
    "nop": (),
}
_NAMES = {"send": "COMM_SEND_NODE", "recv": "COMM_RECV_NODE", "reduce": "COMP_NODE", "local": "COMP_NODE"}


@dataclass(frozen=True)
class MscclConversion:
    """What :func:`convert_msccl` wrote: the files, the collective, nodes per rank, steps by type."""

    written: workload_writer.WrittenWorkload
    collective: str
    nodes_per_rank: dict[int, int]
    steps: dict[str, int] = field(default_factory=dict)

    @property
    def ranks(self) -> int:
        return len(self.nodes_per_rank)


@dataclass
class _Step:
    """One step of a threadblock: its type, its nodes' ids, and what it waits for."""

    kind: str
    index: int
    count: int
    depid: int
    deps: int
    ids: list[int] = field(default_factory=list)


def convert_msccl(path: PathLike, prefix: PathLike, size_bytes: int, collective: str | None = None) -> MscclConversion:
    """Write the MSCCL program ``path`` as ``PREFIX.{gpu}.et`` for a collective of ``size_bytes``;
    ``collective`` (``allreduce``, ``allgather``, ...) defaults to the program's ``coll``."""
    path = Path(path)
    text, root = _read(path)
    gpus = root.findall("gpu")
    if not gpus:
        raise ChakraInputError(
            "the program has no <gpu> elements: nothing to convert", path=path,
            hint="give an MSCCL XML program (MSCCLang's output): <algo> with one <gpu> per rank",
        )  # fmt: skip
    collective = collective or root.get("coll")
    if not collective:
        raise ChakraInputError(
            "the program's <algo> names no collective (coll)", path=path, hint="pass --collective allreduce (...)"
        )
    if size_bytes < 1:
        raise ChakraInputError(f"a collective of {size_bytes} bytes", hint="give --size 1 byte or more")
    ranks: dict[int, list[Node]] = {}
    steps: dict[str, int] = {}
    for gpu in gpus:
        rank = _int(gpu, "id", path)
        if rank in ranks:
            raise ChakraInputError(f"<gpu id={rank}> appears twice", path=path, hint="give each rank one <gpu>")
        ranks[rank] = _gpu_nodes(gpu, rank, size_bytes, collective, path, steps)
    metadata = GlobalMetadata()
    for key, value in (("schema", SCHEMA), ("input_file", text), ("collective", collective)):
        attr = metadata.attr.add()
        attr.name, attr.string_val = key, value
    written = workload_writer.write_workload(prefix, ranks, metadata=metadata)
    return MscclConversion(written, collective, {rank: len(nodes) for rank, nodes in ranks.items()}, steps)


def _read(path: Path) -> tuple[str, ElementTree.Element]:
    try:
        text = path.read_text()
    except OSError as error:
        raise ChakraInputError(f"cannot read the program: {error.strerror}", path=path) from None
    except UnicodeDecodeError as error:
        raise ChakraInputError(f"byte {error.start}: not UTF-8 text", path=path, hint="give MSCCL's XML") from None
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as error:
        line, column = error.position
        raise ChakraInputError(
            f"line {line}, column {column}: not well-formed XML ({str(error).split(':')[0]})",
            path=path,
            hint="give the XML MSCCLang writes",
        ) from None
    if root.tag != "algo":
        raise ChakraInputError(f"the root element is <{root.tag}>, not <algo>", path=path, hint="give MSCCL's XML")
    return text, root


def _int(element: ElementTree.Element, name: str, path: Path, default: int | None = None) -> int:
    value = element.get(name)
    if value is None and default is not None:
        return default
    try:
        return int(value)  # type: ignore[arg-type]  # None raises TypeError, reported below
    except (TypeError, ValueError):
        where = " ".join(f'{key}="{element.get(key)}"' for key in ("id", "s") if element.get(key) is not None)
        raise ChakraInputError(
            f"<{element.tag} {where}> has {name}={value!r}, not an integer", path=path,
            hint="give MSCCL's XML as MSCCLang writes it",
        ) from None  # fmt: skip


def _gpu_nodes(
    gpu: ElementTree.Element, rank: int, size_bytes: int, collective: str, path: Path, counts: dict[str, int]
) -> list[Node]:
    """One GPU's nodes: ids and nodes in document order, then each step's dependencies."""
    chunks = _int(gpu, "i_chunks", path, 0) or _int(gpu, "o_chunks", path, 0)
    if collective in WHOLE_SIZE_COLLECTIVES:
        chunk_bytes = size_bytes
    elif chunks:
        chunk_bytes = int(size_bytes / chunks)
    else:
        raise ChakraInputError(
            f"<gpu id={rank}> has no chunks (i_chunks and o_chunks are 0 or absent)", path=path,
            hint="give the GPU's i_chunks: its buffer is split into that many chunks",
        )  # fmt: skip
    next_id = 0
    nodes: dict[int, Node] = {}
    blocks: dict[int, tuple[ElementTree.Element, dict[int, _Step]]] = {}
    for tb in gpu.findall("tb"):
        block = _int(tb, "id", path)
        steps: dict[int, _Step] = {}
        blocks[block] = (tb, steps)
        for element in tb.findall("step"):
            kind = element.get("type", "")
            if kind not in STEP_PARTS:
                raise ChakraInputError(
                    f"<gpu id={rank}> <tb id={block}> step {element.get('s')} has type {kind!r}", path=path,
                    hint=f"MSCCL's step types are {', '.join(STEP_PARTS)}",
                )  # fmt: skip
            step = _Step(kind, _int(element, "s", path), _int(element, "cnt", path, 0),
                         _int(element, "depid", path, -1), _int(element, "deps", path, -1))  # fmt: skip
            counts[kind] = counts.get(kind, 0) + 1
            steps[step.index] = step
            message = chunk_bytes * step.count
            if kind == "nop":
                next_id += 1  # the converter numbers every step: a nop's id is left unused
            for part in STEP_PARTS[kind]:
                step.ids.append(next_id)
                nodes[next_id] = _node(next_id, part, tb, block, step, message, path)
                next_id += 1
    for block, (_tb, steps) in blocks.items():
        for step in steps.values():
            if step.ids:
                _wire(step, block, blocks, nodes, rank, path)
    return [nodes[node_id] for node_id in sorted(nodes)]


def _node(node_id: int, part: str, tb: ElementTree.Element, block: int, step: _Step, size: int, path: Path) -> Node:
    name = f"{_NAMES[part]}_tb{tb.get('id')}_step{step.index}"
    if part in ("reduce", "local"):
        return trace.new_node(node_id, name, COMP_NODE, duration_us=reduction_us(size, REDUCTION_BW_GBPS))
    peer = _int(tb, "send" if part == "send" else "recv", path)
    if peer < 0:
        raise ChakraInputError(
            f"<tb id={block}> step {step.index} {'sends' if part == 'send' else 'receives'} but the threadblock "
            f"has {'send' if part == 'send' else 'recv'}={peer}", path=path,
            hint="a threadblock that sends names its send peer, one that receives its recv peer",
        )  # fmt: skip
    chan = _int(tb, "chan", path, 0)
    if part == "send":
        return trace.new_node(
            node_id, name, COMM_SEND_NODE, comm_type=COMM_SEND_NODE, comm_size=size, comm_dst=peer, comm_tag=chan
        )
    return trace.new_node(
        node_id, name, COMM_RECV_NODE, comm_type=COMM_RECV_NODE, comm_size=size, comm_src=peer, comm_tag=chan
    )


def _wire(
    step: _Step,
    block: int,
    blocks: dict[int, tuple[ElementTree.Element, dict[int, _Step]]],
    nodes: dict[int, Node],
    rank: int,
    path: Path,
) -> None:
    """The step's dependencies (module docstring), on its first node; its later parts on the part before."""
    head = nodes[step.ids[0]]
    if step.depid != -1:
        head.data_deps.extend(
            _tail(_step_at(blocks, step.depid, step.deps, rank, block, step, path), blocks, rank, path)
        )
    steps = blocks[block][1]
    previous = step.index - 1
    while previous >= 0:
        before = steps.get(previous)
        if before is None:
            raise _missing_step(rank, block, previous, step, path)
        if before.ids:
            head.data_deps.append(before.ids[-1])
            break
        head.data_deps.extend(_tail(before, blocks, rank, path))  # what the nop carried for this step
        previous -= 1
    for earlier, later in zip(step.ids, step.ids[1:], strict=False):
        nodes[later].data_deps.append(earlier)


def _tail(
    step: _Step, blocks: dict[int, tuple[ElementTree.Element, dict[int, _Step]]], rank: int, path: Path
) -> list[int]:
    """The node a dependency on ``step`` waits for: its last node; a nop's, what the nop waits for (the
    converter drops a dependency on a nop, and fails on a nop in a chain of them)."""
    visited: set[tuple[int, int]] = set()
    while not step.ids:
        if step.depid == -1:
            return []
        if (step.depid, step.deps) in visited:
            raise ChakraInputError(
                f"<gpu id={rank}> nop steps wait for each other in a cycle (through <tb id={step.depid}> step "
                f"{step.deps})", path=path, hint="a nop carries a dependency on a step that is not a nop",
            )  # fmt: skip
        visited.add((step.depid, step.deps))
        step = _step_at(blocks, step.depid, step.deps, rank, step.depid, step, path)
    return [step.ids[-1]]


def _step_at(
    blocks: dict[int, tuple[ElementTree.Element, dict[int, _Step]]], block: int, index: int, rank: int,
    from_block: int, step: _Step, path: Path,
) -> _Step:  # fmt: skip
    target = blocks.get(block, (None, {}))[1].get(index)
    if target is None:
        raise _missing_step(rank, block, index, step, path, from_block)
    return target


def _missing_step(
    rank: int, block: int, index: int, step: _Step, path: Path, from_block: int | None = None
) -> ChakraInputError:
    where = f"<tb id={from_block if from_block is not None else block}> step {step.index}"
    return ChakraInputError(
        f"<gpu id={rank}> {where} depends on <tb id={block}> step {index}, which the GPU does not have", path=path,
        hint="depid/deps name a threadblock and step of the same GPU",
    )  # fmt: skip
