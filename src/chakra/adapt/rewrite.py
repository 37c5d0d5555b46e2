"""The second pass of ``adapt``: stream one rank file into its adapted copy, applying a
:class:`~chakra.adapt.plan.RankPlan`.

Runs of records that do not change are copied as the bytes they are (one slice per run), so an
untouched node is byte-identical and costs no decoding; a changed node is parsed, edited and framed
again. A file with nothing to change is copied whole.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from chakra import io
from chakra.adapt.plan import NodeEdit, RankPlan
from chakra.adapt.report import Change, RankChanges
from chakra.adapt.rules import TargetRules
from chakra.attrs import WELL_KNOWN, canonicalize, find_attr, set_attr
from chakra.chunks import NODE_ROW
from chakra.io.framing import encode_varint
from chakra.schema.protobuf.et_def_pb2 import Node, NodeType

#: Bytes copied at a time when a whole file is copied (decompressing on the way).
COPY_CHUNK_BYTES = 1 << 20


def rewrite_rank(plan: RankPlan, rules: TargetRules, out_path: Path) -> RankChanges:
    """Write ``plan.path`` adapted to ``out_path``; returns the changes made while writing (the
    attribute rewrites, the decompression), which the plan could not count in advance."""
    changes = RankChanges()
    if plan.compressed and rules.plain_files:
        changes.add(Change.DECOMPRESSED)
    if plan.unchanged:
        _copy(plan.path, out_path)
        return changes
    changed = np.union1d(plan.removed, np.fromiter(plan.edits, dtype=np.int64, count=len(plan.edits)))
    removed = set(plan.removed.tolist())
    with io.EtReader(plan.path) as reader, open(out_path, "wb") as out:
        out.write(reader.metadata_record)
        for batch in reader.decoded_batches({}, {}):
            rows = np.frombuffer(batch.nodes, dtype=NODE_ROW)
            ends = rows["rec_off"] + rows["rec_len"]
            first, last = batch.first_index, batch.first_index + batch.num_nodes
            here = changed[np.searchsorted(changed, first) : np.searchsorted(changed, last)]
            pieces: list[bytes] = []
            copy_from = _frame_start(rows, 0)
            for pos in here.tolist():
                k = pos - first
                pieces.append(batch.buf[copy_from : _frame_start(rows, k)])
                copy_from = int(ends[k])
                if pos in removed:
                    continue
                node = Node.FromString(batch.buf[int(rows["rec_off"][k]) : copy_from])
                _apply(node, plan.edits[pos], rules, changes)
                pieces.append(io.frame(node.SerializeToString()))
            pieces.append(batch.buf[copy_from : int(ends[-1])])
            out.write(b"".join(pieces))
    return changes


def _frame_start(rows: np.ndarray, k: int) -> int:
    """Offset of record ``k``'s length prefix (its payload offset less the prefix's size)."""
    return int(rows["rec_off"][k]) - len(encode_varint(int(rows["rec_len"][k])))


def _apply(node: Node, edit: NodeEdit, rules: TargetRules, changes: RankChanges) -> None:
    """Make the changes of ``edit`` to ``node``, keeping everything else as it was."""
    if edit.fix_attrs:
        seen: set[str] = set()
        for attr in node.attr:
            if attr.name in seen or attr.name not in rules.read_attrs:
                continue
            seen.add(attr.name)  # the first of a name is the one consumers read
            was = canonicalize(attr)
            if was is not None:
                changes.add(Change.ATTR_MEMBER, f"{attr.name}: {was} -> {WELL_KNOWN[attr.name].member}")
    if edit.data_deps is not None:
        del node.data_deps[:]
        node.data_deps.extend(edit.data_deps)
    if edit.ctrl_deps is not None:
        del node.ctrl_deps[:]
        node.ctrl_deps.extend(edit.ctrl_deps)
    if edit.pg_name is not None:
        group = find_attr(node, "pg_name")
        if group is None:
            set_attr(node, "pg_name", edit.pg_name)
        else:
            group.string_val = edit.pg_name
    if edit.comm_type is not None:
        kind = find_attr(node, "comm_type")
        assert kind is not None  # the plan read it
        kind.int64_val = edit.comm_type
        set_attr(node, "recorded_comm_type", edit.recorded_comm_type)
    if edit.as_compute:
        set_attr(node, "recorded_node_type", int(node.type))
        node.type = NodeType.COMP_NODE
    if edit.off_cpu:
        cpu_flag = find_attr(node, "is_cpu_op")
        assert cpu_flag is not None  # the plan read it as true
        cpu_flag.bool_val = False


def _copy(source: Path, out_path: Path) -> None:
    """Copy a rank file that needs no change: byte for byte, decompressed when it is compressed."""
    if io.compression_for(source) is None:
        shutil.copyfile(source, out_path)
        return
    stream, _ = io.open_decompressed(source)
    try:
        with open(out_path, "wb") as out:
            shutil.copyfileobj(stream, out, COPY_CHUNK_BYTES)
    finally:
        stream.close()
