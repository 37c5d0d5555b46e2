"""``--compute aten``: re-run a node's recorded ATen operator on tensors of its recorded shapes.

A PyTorch host node carries its operator's schema (``op_schema``, e.g. ``aten::addmm(Tensor self,
Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor``) and its inputs' values,
shapes and types as the execution trace recorded them. :func:`prepare_aten` turns one node into a
call of ``torch.ops.aten.<name>.<overload>``: a tensor input becomes a zero tensor of its recorded
shape and dtype (at most ``max_tensor_bytes``), a list of tensors a list of them, ``'<None>'`` and
``None`` types ``None``, scalars their values, ScalarType/Layout/MemoryFormat codes their torch
values; arguments after ``*`` in the schema go as keywords. It runs once as a test; a node it
cannot prepare or run gets a reason, and the replay falls back to ``kernels`` for it, counted by
reason. An operator that other operators of the trace are inside (``aten::linear`` around its
``aten::t`` and ``aten::addmm``: their ctrl dep is the outer op) is not re-run itself: its children
are, so the work is done once.

Example:
    call, reason = prepare_aten(node, max_tensor_bytes=64 << 20)
    if call is not None:
        call()
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from chakra.attrs import get_attr
from chakra.schema.protobuf.et_def_pb2 import Node

#: How the execution trace writes an absent optional value.
NONE_TEXT = "<None>"
#: torch's ScalarType codes (c10/core/ScalarType.h), as traces record dtype arguments.
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
                7: "float64", 11: "bool", 15: "bfloat16"}  # fmt: skip
#: The element types of recorded tensors (``Tensor(float)``).
TENSOR_TYPES = {"float": "float32", "double": "float64", "half": "float16", "c10::Half": "float16",
                "c10::BFloat16": "bfloat16", "long int": "int64", "int": "int32", "bool": "bool",
                "unsigned char": "uint8", "signed char": "int8", "short int": "int16"}  # fmt: skip
#: Layout and memory-format codes (c10/core/Layout.h, MemoryFormat.h).
LAYOUTS = {0: "strided"}
MEMORY_FORMATS = {0: "contiguous_format", 1: "preserve_format", 2: "channels_last", 3: "channels_last_3d"}
ATEN_PREFIX = "aten::"


def prepare_aten(node: Node, max_tensor_bytes: int, device: str = "cpu") -> tuple[Callable[[], Any] | None, str]:
    """A call that re-runs ``node``'s operator on tensors on ``device``, or ``None`` and why not."""
    import torch

    schema = get_attr(node, "op_schema")
    if not isinstance(schema, str) or not schema.startswith(ATEN_PREFIX):
        return None, "no aten op_schema"
    head, _, rest = schema.partition("(")
    name, _, overload = head[len(ATEN_PREFIX) :].partition(".")
    packet = getattr(torch.ops.aten, name, None)
    operator = getattr(packet, overload or "default", None) if packet is not None else None
    if operator is None:
        return None, f"aten::{name} not in this torch"
    params = _parameters(rest.rpartition(")")[0])
    try:
        values = _literal(node.inputs.values)
        shapes = _literal(node.inputs.shapes)
        types = _literal(node.inputs.types)
    except (ValueError, SyntaxError):
        return None, "inputs not readable"
    if not (len(values) == len(shapes) == len(types)):
        return None, "inputs of different lengths"
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for k, (value, shape, kind) in enumerate(zip(values, shapes, types, strict=True)):
        try:
            made = _value(torch, value, shape, kind, max_tensor_bytes, device)
        except _Unsupported as why:
            return None, str(why)
        if k < len(params) and params[k][1]:
            kwargs[params[k][0]] = made
        else:
            args.append(made)
    call = _bound(operator, args, kwargs)
    try:
        call()
    except Exception as exc:  # an operator refusing our stand-in inputs: fall back, say which
        return None, f"aten::{name} refused the recorded inputs ({type(exc).__name__})"
    return call, ""


def _bound(operator: Any, args: list[Any], kwargs: dict[str, Any]) -> Callable[[], Any]:
    return lambda: operator(*args, **kwargs)


class _Unsupported(Exception):
    pass


def _parameters(text: str) -> list[tuple[str, bool]]:
    """(name, keyword-only) of every schema argument, in order.

    >>> _parameters("Tensor self, Tensor mat1, *, Scalar beta=1, int[1]? dim=None")
    [('self', False), ('mat1', False), ('beta', True), ('dim', True)]
    """
    out = []
    keyword = False
    depth = 0
    current = ""
    for char in text + ",":
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        if char == "," and depth == 0:
            part = current.strip()
            current = ""
            if part == "*":
                keyword = True
            elif part:
                out.append((part.partition("=")[0].split()[-1], keyword))
            continue
        current += char
    return out


def _literal(text: str) -> list[Any]:
    parsed = ast.literal_eval(text) if text else []
    return list(parsed) if isinstance(parsed, (list, tuple)) else [parsed]


def _value(torch: Any, value: Any, shape: Any, kind: str, max_tensor_bytes: int, device: str) -> Any:
    if value == NONE_TEXT or kind == "None":
        return None
    if kind.startswith("Tensor"):
        return _tensor(torch, shape, kind, max_tensor_bytes, device)
    if kind.startswith("GenericList"):
        inner = kind[len("GenericList[") : -1].split(",") if kind.endswith("]") else []
        if inner and all(t.startswith("Tensor") for t in inner):
            return [_tensor(torch, s, t, max_tensor_bytes, device) for s, t in zip(shape, inner, strict=False)]
        return list(value) if isinstance(value, (list, tuple)) else value
    if kind == "ScalarType":
        return getattr(torch, SCALAR_TYPES.get(value, "float32"))
    if kind == "Layout":
        return getattr(torch, LAYOUTS.get(value, "strided"))
    if kind == "MemoryFormat":
        return getattr(torch, MEMORY_FORMATS.get(value, "contiguous_format"))
    if kind == "Device":  # where this replay runs, not where the recording did
        return torch.device(device)
    if kind in ("Int", "Double", "Bool", "String"):
        return value
    raise _Unsupported(f"an input of type {kind}")


def _tensor(torch: Any, shape: Any, kind: str, max_tensor_bytes: int, device: str) -> Any:
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise _Unsupported("a tensor of unknown shape")
    element = kind[len("Tensor(") : -1] if kind.startswith("Tensor(") else "float"
    dtype = getattr(torch, TENSOR_TYPES.get(element, "float32"))
    count = 1
    for d in shape:
        count *= d
    if count * torch.empty((), dtype=dtype).element_size() > max_tensor_bytes:
        raise _Unsupported("a tensor over the buffer bound")
    return torch.zeros(shape, dtype=dtype, device=device)


def outer_ops(nodes: list[Node]) -> set[int]:
    """Ids of the ATen ops that other ATen ops of ``nodes`` run inside (their ctrl dep)."""
    aten = {n.id for n in nodes if str(get_attr(n, "op_schema") or "").startswith(ATEN_PREFIX)}
    return {parent for n in nodes if n.id in aten for parent in n.ctrl_deps if parent in aten}
