"""Dependency-graph pictures of one rank: DOT, GraphML, and SVG/PDF/PNG through Graphviz ``dot``.

:func:`select` (:mod:`chakra.viz.graph_view`) picks the subgraph to draw (a :class:`GraphView`), :func:`write_dot`,
:func:`write_graphml` and :func:`render` write it, :func:`export_graph` does both by file suffix.
DOT and GraphML are written here, streamed and escaped by hand (no graphviz or networkx import);
only SVG/PDF/PNG need the Graphviz ``dot`` program.

What is drawn (upstream-behaviour.md item 41 lists what upstream's visualizer gets wrong):

* **Which nodes.** ``around=ID`` keeps that node and every node within ``depth`` hops of it
  upstream (parents, grandparents, ...) and downstream (children, ...); hops do not turn round,
  so siblings are not included. ``comm_only`` keeps communication nodes (collectives, sends,
  receives), ``collapse_cpu`` hides CPU ops; the ``around`` node itself always stays. Then at most
  ``max_nodes`` nodes stay: the first ones in dependency order (:data:`DEFAULT_MAX_NODES`, since
  Graphviz is unusable beyond a few thousand nodes).
* **Which edges.** Every dependency between two drawn nodes, data (solid) and control (dashed, tee
  arrowhead as upstream); a node with both a data and a control dependency on the same parent keeps
  both edges, in GraphML too. Where ``comm_only``/``collapse_cpu`` hide nodes, two drawn nodes
  are joined by a ``path`` edge (dotted) when a dependency path runs from one to the other through
  hidden nodes only (within the ``around`` neighbourhood when there is one). Nodes cut by
  ``around`` or ``max_nodes`` are not bridged: the picture simply ends there. Dependencies on ids
  missing from the file are counted in the notes, never drawn as unlabeled nodes.
* **Pictures** (DOT, SVG, PDF, PNG) of views with more than :data:`FULL_EDGES_LIMIT` edges leave
  out edges implied by longer paths between drawn nodes (a transitive reduction; the graph label
  says how many; ``all_edges=True`` keeps them), and above :data:`FAST_LAYOUT_NODES` nodes ask
  ``dot`` for a quicker layout: real traces are dense (upstream's chakra.0.et has 50 dependencies
  a node) and Graphviz otherwise takes hours. The :class:`GraphView` and GraphML keep every edge.
* **Keys.** DOT node names and GraphML node ids are the node ids as text, as upstream's; an id
  that occurs more than once keeps the plain key at its last occurrence (the one dependencies
  resolve to, as in the feeders) and ``ID@POSITION`` at the others.
* **Labels**: name (cut at :data:`MAX_LABEL_NAME_CHARS`; the full name is the DOT tooltip and the
  GraphML ``name``), id, node type, duration in µs, and for communication nodes the collective
  or direction and the size. Shape and colour by category (CPU ops rounded and yellow).
* **GraphML** (networkx-readable; a MultiDiGraph when there are parallel edges): node ``label``,
  ``name``, ``node_id``, ``type``, ``category``, ``dur_us``, and ``comm_type``/``comm_size`` on
  communication nodes; edge ``dependency`` = ``data`` | ``control`` | ``path`` (upstream's key);
  graph ``notes``. In DOT the notes are the graph label and comments.

Example:
    table = load_table("job.0.et")
    view = export_graph(table, "step.svg", comm_only=True)
    view.notes
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from chakra import io
from chakra.errors import ChakraInputError
from chakra.graph import MAX_REDUCE_NODES, transitive_reduction
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, CollectiveCommType, NodeType
from chakra.table import (
    CATEGORY_NAMES,
    COMMUNICATION,
    COMPUTE,
    DEFAULT_GROUP_ID,
    INVALID_GROUP_ID,
    MEMORY,
    OTHER,
    NodeTable,
)
from chakra.units import NS_PER_US
from chakra.viz.graph_view import (
    CONTROL,
    DATA,
    DEFAULT_DEPTH,
    DEFAULT_MAX_NODES,
    MAX_BRIDGE_SOURCES,
    PATH,
    GraphView,
    select,
)

PathLike = str | os.PathLike[str]

#: Edges a picture draws in full. Graphviz routes every edge through each rank it spans, so dense
#: dependency graphs stall it: on upstream chakra.0.et, 300 nodes with 875 edges lay out in 0.2 s,
#: 112 nodes with 3,470 edges take over 5 minutes. Beyond this, edges implied by longer paths are
#: left out of pictures (a transitive reduction: 3,470 -> 170 edges there).
FULL_EDGES_LIMIT = 1000
#: Views above this many nodes ask ``dot`` for fewer layout iterations (below: the full layout).
#: On upstream chakra.0.et, reduced, 1,000 nodes take 12 s with the full layout and 1.4 s with
#: this one; 2,000 nodes over a minute and 3.6 s; on a converted ResNet rank 300 nodes with 597
#: edges take 100 s and 0.8 s, 100 nodes 10 s: only small pictures get the full layout.
FAST_LAYOUT_NODES = 50
#: Longest a ``dot`` run may take before it is stopped with a clear error.
DOT_TIMEOUT_S = 300
#: Linux ``prctl`` option: a signal for the child when its parent dies (``<sys/prctl.h>``).
_PR_SET_PDEATHSIG = 1
_FAST_LAYOUT = ", nslimit=1, nslimit1=1, mclimit=0.1, remincross=false"
#: Name characters shown in a label: PyTorch kernel names run to hundreds of characters.
MAX_LABEL_NAME_CHARS = 60

#: Output formats by file suffix; the last three are rendered by Graphviz ``dot``.
GRAPH_SUFFIXES = {".dot": "dot", ".gv": "dot", ".graphml": "graphml", ".svg": "svg", ".pdf": "pdf", ".png": "png"}
RENDER_FORMATS = ("svg", "pdf", "png")
DOT_PROGRAM = "dot"
_DOT_HINT = "install Graphviz (apt-get install graphviz, brew install graphviz), or write .dot or .graphml instead"

# One light fill per category so black text stays readable; the hexagon marks communication at a glance.
_CATEGORY_STYLE: dict[int, str] = {
    COMPUTE: 'shape=box, style=filled, fillcolor="#cfe2f3"',
    COMMUNICATION: 'shape=hexagon, style=filled, fillcolor="#f9cb9c"',
    MEMORY: 'shape=cylinder, style=filled, fillcolor="#d9ead3"',
    OTHER: 'shape=ellipse, style=filled, fillcolor="#eeeeee"',
}
_CPU_STYLE = 'shape=box, style="filled,rounded", fillcolor="#fff2cc"'
_AROUND_STYLE = ", penwidth=3"
_EDGE_STYLE = {DATA: "", CONTROL: " [style=dashed, arrowhead=tee]", PATH: ' [style=dotted, color="#777777"]'}

_TYPE_NAMES = {value: name for name, value in NodeType.items()}
_COLLECTIVE_NAMES = {value: name for name, value in CollectiveCommType.items()}
_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
_BYTES_PER_UNIT = 1024
#: Characters written per write call while streaming a file.
_CHUNK_CHARS = 1 << 20

# Control characters cannot be shown and are not allowed in XML 1.0: they become U+FFFD.
_UNPRINTABLE = {c: "\ufffd" for c in [*range(0x20), 0x7F] if c not in (0x09, 0x0A, 0x0D)}
# In a quoted DOT string `"` and `\` are escapes, newlines are written as `\n`, and Graphviz reads
# HTML entities in labels, so `&` is written as `&amp;` to show names as they are.
_DOT_ESCAPES = str.maketrans(
    {**_UNPRINTABLE, "\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\n", "\t": " ", "&": "&amp;"}
)
_XML_ESCAPES = str.maketrans({**_UNPRINTABLE, "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;"})


# ---------------------------------------------------------------------------------------------
# Labels


def _size_text(size_bytes: int) -> str:
    value = float(size_bytes)
    for unit in _SIZE_UNITS:
        if value < _BYTES_PER_UNIT or unit == _SIZE_UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= _BYTES_PER_UNIT
    raise AssertionError("unreachable")


def _dur_text(dur_ns: int) -> str:
    dur_us = dur_ns / NS_PER_US
    # three significant digits, but never an exponent for long operations
    return f"{dur_us:,.0f} µs" if dur_us >= 1000 else f"{dur_us:.3g} µs"


@dataclass
class _Nodes:
    """What the writers need of each drawn node, as lists aligned with ``view.positions``."""

    keys: list[str]
    names: list[str]
    label_lines: list[list[str]]
    ids: list[int]
    types: list[str]
    categories: list[str]
    is_cpu: list[bool]
    category_codes: list[int]
    dur_us: list[float]
    comm: dict[int, tuple[str, int]]  # index in positions -> (comm_type, size_bytes)
    key_of: dict[int, str]  # position -> key


def _group_text(table: NodeTable, pos: int) -> str:
    """A communication node's group as the label shows it: its id as every consumer reads it (``pg_name`` " 1"
    is group 1), nothing for all ranks, a ``pg_name`` that names no group as written."""
    at = table.comm.index(pos)
    if at is None:
        return ""
    group = int(table.comm.group[at])
    if group == DEFAULT_GROUP_ID:
        return ""
    return f" pg {table.comm.pg_name[at]!r}" if group == INVALID_GROUP_ID else f" pg {group}"


def _nodes(table: NodeTable, view: GraphView) -> _Nodes:
    graph = table.graph
    positions = view.positions
    pos_l = positions.tolist()
    ids = table.ids[positions].tolist()
    last = graph.positions(table.ids[positions]).tolist()  # the occurrence of each id dependents point to
    keys = [str(i) if q == p else f"{i}@{p}" for i, p, q in zip(ids, pos_l, last, strict=True)]
    types_code = graph.node_type[positions].tolist()
    types = [_TYPE_NAMES.get(t, f"type {t}") for t in types_code]
    cats = table.category[positions].tolist()
    dur_ns = table.dur_ns[positions].tolist()
    comm_type = table.comm_type[positions].tolist()
    comm_size = table.comm_size[positions].tolist()
    names = [table.names[p] for p in pos_l]
    lines: list[list[str]] = []
    comm: dict[int, tuple[str, int]] = {}
    for k, pos in enumerate(pos_l):
        name = names[k]
        shown = name if len(name) <= MAX_LABEL_NAME_CHARS else name[: MAX_LABEL_NAME_CHARS - 1] + "…"
        node_lines = [shown, f"#{ids[k]} {types[k]} {_dur_text(dur_ns[k])}"]
        if cats[k] == COMMUNICATION:
            info = table.comm.get(pos)
            peer = ""
            if types_code[k] == COMM_SEND_NODE:
                what = "send"
                peer = f" to {info.dst}" if info and info.dst is not None else ""
            elif types_code[k] == COMM_RECV_NODE:
                what = "recv"
                peer = f" from {info.src}" if info and info.src is not None else ""
            else:
                what = _COLLECTIVE_NAMES.get(comm_type[k], "collective" if comm_type[k] < 0 else f"comm {comm_type[k]}")
            comm[k] = (what, comm_size[k])
            group = _group_text(table, pos)
            node_lines.append(f"{what} {_size_text(comm_size[k])}{peer}{group}")
        lines.append(node_lines)
    return _Nodes(
        keys=keys,
        names=names,
        label_lines=lines,
        ids=ids,
        types=types,
        categories=[CATEGORY_NAMES[c] for c in cats],
        is_cpu=table.is_cpu[positions].tolist(),
        category_codes=cats,
        dur_us=[d / NS_PER_US for d in dur_ns],
        comm=comm,
        key_of=dict(zip(pos_l, keys, strict=True)),
    )


# ---------------------------------------------------------------------------------------------
# Writing


def _write_chunks(path: PathLike, chunks: Iterator[str]) -> None:
    with io.AtomicFile(path) as handle:
        for chunk in chunks:
            handle.write(chunk.encode("utf-8"))


def _batched(lines: Iterator[str]) -> Iterator[str]:
    """Join lines into chunks of about :data:`_CHUNK_CHARS` characters."""
    batch: list[str] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if size >= _CHUNK_CHARS:
            yield "".join(batch)
            batch, size = [], 0
    if batch:
        yield "".join(batch)


def _implied_pairs(view: GraphView) -> set[tuple[int, int]] | None:
    """``(parent, child)`` pairs of ``view.edges`` implied by a longer path between drawn nodes
    (:func:`chakra.graph.transitive_reduction` over the drawn nodes); ``None`` for too large a view."""
    positions = view.positions.tolist()
    index_of = dict(zip(positions, range(len(positions)), strict=True))
    implied = transitive_reduction(len(positions), ((index_of[a], index_of[b]) for a, b, _ in view.edges))
    if implied is None:
        return None
    return {(positions[a], positions[b]) for a, b in implied}


def _picture_edges(view: GraphView, all_edges: bool) -> tuple[list[tuple[int, int, str]], list[str]]:
    """The edges a picture draws, and notes about the ones it leaves out (once per view)."""
    found = view._pictures.get(all_edges)
    if found is None:
        found = view._pictures[all_edges] = _reduce_for_picture(view, all_edges)
    return found


def _reduce_for_picture(view: GraphView, all_edges: bool) -> tuple[list[tuple[int, int, str]], list[str]]:
    if all_edges or len(view.edges) <= FULL_EDGES_LIMIT:
        return view.edges, []
    implied = _implied_pairs(view)
    if implied is None:
        return view.edges, [
            f"too many nodes to leave out implied edges (over {MAX_REDUCE_NODES:,}): layout will be slow"
        ]
    kept = [edge for edge in view.edges if (edge[0], edge[1]) not in implied]
    note = (
        f"{len(view.edges) - len(kept):,} edges implied by longer paths are not drawn "
        "(transitive reduction; GraphML keeps every edge)"
    )
    return kept, [note]


def _dot_lines(table: NodeTable, view: GraphView, all_edges: bool = False) -> Iterator[str]:
    nodes = _nodes(table, view)
    edges, picture_notes = _picture_edges(view, all_edges)
    notes = [*view.notes, *picture_notes]
    title = (table.label or "trace").translate(_DOT_ESCAPES)
    summary = f"{title}: {len(view.positions):,} nodes, {len(edges):,} edges"
    yield "// Chakra dependency graph written by chakra-et\n"
    for note in notes:
        yield f"// {note.translate(_UNPRINTABLE)}\n"
    yield "digraph chakra {\n"
    graph_label = "\\n".join([summary, *(note.translate(_DOT_ESCAPES) for note in notes)])
    layout = _FAST_LAYOUT if len(view.positions) > FAST_LAYOUT_NODES else ""
    yield f'  graph [label="{graph_label}", labelloc=t, fontname="Helvetica", fontsize=12{layout}];\n'
    yield '  node [fontname="Helvetica", fontsize=10];\n'
    yield '  edge [color="#333333"];\n'
    escaped: dict[str, str] = {}
    around = view.around_position
    for k, pos in enumerate(view.positions.tolist()):
        lines = nodes.label_lines[k]
        label = "\\n".join(line.translate(_DOT_ESCAPES) for line in lines)
        name = nodes.names[k]
        tooltip = ""
        if len(name) > MAX_LABEL_NAME_CHARS:
            full = escaped.get(name)
            if full is None:
                full = escaped[name] = name.translate(_DOT_ESCAPES)
            tooltip = f', tooltip="{full}"'
        if nodes.category_codes[k] == COMPUTE and nodes.is_cpu[k]:
            style = _CPU_STYLE
        else:
            style = _CATEGORY_STYLE[nodes.category_codes[k]]
        extra = _AROUND_STYLE if pos == around else ""
        yield f'  "{nodes.keys[k]}" [label="{label}"{tooltip}, {style}{extra}];\n'
    key_of = nodes.key_of
    for parent, child, kind in edges:
        yield f'  "{key_of[parent]}" -> "{key_of[child]}"{_EDGE_STYLE[kind]};\n'
    yield "}\n"


def write_dot(table: NodeTable, view: GraphView, path: PathLike, *, all_edges: bool = False) -> None:
    """Write ``view`` as a Graphviz DOT file at ``path`` (atomically).

    Above :data:`FULL_EDGES_LIMIT` edges, edges implied by longer paths are left out (the graph
    label says how many) unless ``all_edges``; above :data:`FAST_LAYOUT_NODES` nodes the file asks
    ``dot`` for its quicker layout.
    """
    _write_chunks(path, _batched(_dot_lines(table, view, all_edges)))


_GRAPHML_KEYS = (
    ("label", "node", "string"),
    ("name", "node", "string"),
    ("node_id", "node", "long"),
    ("type", "node", "string"),
    ("category", "node", "string"),
    ("dur_us", "node", "double"),
    ("comm_type", "node", "string"),
    ("comm_size", "node", "long"),
    ("dependency", "edge", "string"),
    ("notes", "graph", "string"),
)


def _graphml_lines(table: NodeTable, view: GraphView) -> Iterator[str]:
    nodes = _nodes(table, view)
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    yield (
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
        'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
    )
    for name, owner, kind in _GRAPHML_KEYS:
        yield f'  <key id="{name}" for="{owner}" attr.name="{name}" attr.type="{kind}"/>\n'
    yield '  <graph id="chakra" edgedefault="directed">\n'
    notes = "\n".join(view.notes).translate(_XML_ESCAPES)
    yield f'    <data key="notes">{notes}</data>\n'
    escaped: dict[str, str] = {}
    for k in range(len(view.positions)):
        name = nodes.names[k]
        name_xml = escaped.get(name)
        if name_xml is None:
            name_xml = escaped[name] = name.translate(_XML_ESCAPES)
        label = "\n".join(nodes.label_lines[k]).translate(_XML_ESCAPES)
        comm = ""
        if k in nodes.comm:
            what, size = nodes.comm[k]
            comm = f'<data key="comm_type">{what}</data><data key="comm_size">{size}</data>'
        yield (
            f'    <node id="{nodes.keys[k]}"><data key="label">{label}</data><data key="name">{name_xml}</data>'
            f'<data key="node_id">{nodes.ids[k]}</data><data key="type">{nodes.types[k]}</data>'
            f'<data key="category">{nodes.categories[k]}</data><data key="dur_us">{nodes.dur_us[k]!r}</data>'
            f"{comm}</node>\n"
        )
    key_of = nodes.key_of
    for e, (parent, child, kind) in enumerate(view.edges):
        yield (
            f'    <edge id="e{e}" source="{key_of[parent]}" target="{key_of[child]}">'
            f'<data key="dependency">{kind}</data></edge>\n'
        )
    yield "  </graph>\n</graphml>\n"


def write_graphml(table: NodeTable, view: GraphView, path: PathLike) -> None:
    """Write ``view`` as GraphML at ``path`` (atomically), readable by ``networkx.read_graphml``."""
    _write_chunks(path, _batched(_graphml_lines(table, view)))


def _dot_program(path: PathLike, fmt: str) -> str:
    program = shutil.which(DOT_PROGRAM)
    if program is None:
        raise ChakraInputError(
            f"drawing .{fmt} needs Graphviz's `dot` program, which is not installed", path=path, hint=_DOT_HINT
        )
    return program


def _stop_with_parent() -> None:
    """In the ``dot`` child, before it runs: have Linux stop it if chakra is killed meanwhile (else
    it would go on laying out with no one to read it). Elsewhere a no-op."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def render(
    table: NodeTable, view: GraphView, path: PathLike, fmt: str | None = None, *, all_edges: bool = False
) -> None:
    """Lay out ``view`` with Graphviz ``dot`` into ``path`` (atomically); ``fmt`` (svg, pdf, png)
    defaults to the suffix, ``all_edges`` as in :func:`write_dot`. Raises :class:`ChakraInputError`
    when ``dot`` is missing or fails."""
    fmt = (fmt or Path(path).suffix.lstrip(".")).lower()
    if fmt not in RENDER_FORMATS:
        raise ChakraInputError(
            f"cannot render the format {fmt!r}", path=path, hint=f"use one of {', '.join(RENDER_FORMATS)}"
        )
    program = _dot_program(path, fmt)
    source = "".join(_dot_lines(table, view, all_edges)).encode("utf-8")
    try:
        done = subprocess.run(
            [program, f"-T{fmt}"],
            input=source,
            capture_output=True,
            check=False,
            timeout=DOT_TIMEOUT_S,
            preexec_fn=_stop_with_parent,
        )
    except subprocess.TimeoutExpired:
        raise ChakraInputError(
            f"Graphviz dot did not finish laying out {len(view.positions):,} nodes in {DOT_TIMEOUT_S} s",
            path=path,
            hint="write .dot or .graphml instead, or draw fewer nodes (--max-nodes, --around, --comm-only)",
        ) from None
    if done.returncode != 0:
        messages = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ChakraInputError(
            f"Graphviz dot failed: {messages[-1] if messages else f'exit code {done.returncode}'}",
            path=path,
            hint="write .dot to inspect the input, or draw fewer nodes (max_nodes, around, comm_only)",
        )
    with io.AtomicFile(path) as handle:
        handle.write(done.stdout)


def export_graph(table: NodeTable, path: PathLike, *, all_edges: bool = False, **select_options: Any) -> GraphView:
    """Select (:func:`select` with ``select_options``) and write the graph; the format comes from
    the suffix of ``path`` (see :data:`GRAPH_SUFFIXES`), ``all_edges`` as in :func:`write_dot`.
    Returns the view that was drawn.

    Example:
        export_graph(table, "around.svg", around=42, depth=1)
    """
    suffix = Path(path).suffix.lower()
    fmt = GRAPH_SUFFIXES.get(suffix)
    if fmt is None:
        raise ChakraInputError(
            f"unknown graph format {suffix or '(no suffix)'}",
            path=path,
            hint=f"use one of {' '.join(GRAPH_SUFFIXES)}",
        )
    if fmt in RENDER_FORMATS:
        _dot_program(path, fmt)  # fail before the work
    view = select(table, **select_options)
    if fmt == "dot":
        write_dot(table, view, path, all_edges=all_edges)
    elif fmt == "graphml":
        write_graphml(table, view, path)
    else:
        render(table, view, path, fmt, all_edges=all_edges)
    if fmt == "graphml":
        return view
    # what the picture leaves out is said in it, and to the caller
    return replace(view, notes=[*view.notes, *_picture_edges(view, all_edges)[1]], _pictures=view._pictures)


__all__ = [
    "CONTROL",
    "DATA",
    "DEFAULT_DEPTH",
    "DEFAULT_MAX_NODES",
    "MAX_BRIDGE_SOURCES",
    "PATH",
    "GraphView",
    "export_graph",
    "render",
    "select",
    "write_dot",
    "write_graphml",
]
