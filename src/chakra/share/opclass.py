"""Coarse operator classes: what ``chakra anonymize --keep-op-kinds`` keeps of an operator's name.

A table of rules, first match wins, on the lowercased name: PyTorch ATen ops (``aten::addmm``),
CUDA kernel names (``ampere_sgemm_128x64_nn``, ``void at::native::vectorized_elementwise_kernel``),
XLA and TensorFlow op types (``dot``, ``convolution``, ``MatMul``, ``_FusedConv2D``), and the
generators' names (``layer3.attn.qkv``). Communication and memory nodes take their class from the
node type. A name no rule matches is ``other``.

Example:
    >>> op_class("aten::addmm"), op_class("ampere_fp16_s1688gemm_fp16_128x128"), op_class("aten::relu_")
    ('matmul', 'matmul', 'elementwise')
    >>> op_class("flash_fwd_kernel"), op_class("aten::sum"), op_class("aten::copy_")
    ('attention', 'reduction', 'memory copy')
"""

from __future__ import annotations

import re

from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    MEM_LOAD_NODE,
    MEM_STORE_NODE,
    METADATA_NODE,
)

MATMUL, CONVOLUTION, ATTENTION = "matmul", "convolution", "attention"
ELEMENTWISE, REDUCTION, MEMORY_COPY = "elementwise", "reduction", "memory copy"
COMMUNICATION, METADATA, OTHER = "communication", "metadata", "other"
#: Every class a name can become (the vocabulary anonymized names are made of).
CLASSES = (MATMUL, CONVOLUTION, ATTENTION, ELEMENTWISE, REDUCTION, MEMORY_COPY, COMMUNICATION, METADATA, OTHER)

#: (class, pattern) in the order they are tried; attention before matmul (attention kernels do GEMMs),
#: convolution before matmul (implicit-GEMM convolution kernels), reductions before elementwise.
RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile("|".join(patterns)))
    for name, patterns in (
        (ATTENTION, (r"attention", r"attn", r"sdpa", r"fmha", r"\bmha\b", r"flash", r"scaled_dot_product",
                     r"softmax_backward_data")),
        (CONVOLUTION, (r"conv", r"cudnn", r"winograd", r"implicit_gemm", r"depthwise")),
        (COMMUNICATION, (r"nccl", r"all_?reduce", r"all_?gather", r"reduce_?scatter", r"all_?to_?all", r"broadcast",
                         r"c10d::", r"gloo")),
        (MATMUL, (r"gemm", r"matmul", r"\bmm\b", r"::mm\b", r"addmm", r"bmm", r"baddbmm", r"linear", r"\bdot\b",
                  r"einsum", r"cublas", r"cutlass", r"qkv", r"proj", r"\bfc\d*\b", r"mlp")),
        (REDUCTION, (r"\bsum\b", r"::sum", r"mean", r"reduce", r"norm", r"softmax", r"\bmax\b", r"\bmin\b",
                     r"argmax", r"argmin", r"\bvar\b", r"\bstd\b", r"cumsum", r"topk", r"loss")),
        (MEMORY_COPY, (r"copy", r"memcpy", r"memset", r"contiguous", r"clone", r"\bcat\b", r"::cat", r"transpose",
                       r"permute", r"index", r"gather", r"scatter", r"\bpad\b", r"slice", r"split", r"stack",
                       r"embedding", r"reshape", r"\bview\b", r"expand", r"\bto\b", r"::to\b", r"_to_copy",
                       r"concat")),
        (ELEMENTWISE, (r"elementwise", r"vectorized", r"unrolled", r"add", r"\bmul", r"::mul", r"\bdiv", r"::div",
                       r"\bsub", r"::sub", r"relu", r"gelu", r"silu", r"swish", r"tanh", r"sigmoid", r"\bexp",
                       r"::exp", r"\blog", r"::log", r"pow", r"sqrt", r"rsqrt", r"where", r"fill", r"dropout", r"neg",
                       r"abs", r"clamp", r"threshold", r"optimizer", r"adam", r"sgd", r"rope", r"rotary")),
    )
)  # fmt: skip

_TYPE_CLASS: dict[int, str] = {
    COMM_COLL_NODE: COMMUNICATION,
    COMM_SEND_NODE: COMMUNICATION,
    COMM_RECV_NODE: COMMUNICATION,
    MEM_LOAD_NODE: MEMORY_COPY,
    MEM_STORE_NODE: MEMORY_COPY,
    METADATA_NODE: METADATA,
}


def op_class(name: str, node_type: int = COMP_NODE) -> str:
    """The coarse class of a node named ``name`` of ``node_type`` (one of :data:`CLASSES`)."""
    by_type = _TYPE_CLASS.get(node_type)
    if by_type is not None:
        return by_type
    lowered = name.lower()
    for found, pattern in RULES:
        if pattern.search(lowered):
            return found
    return OTHER
