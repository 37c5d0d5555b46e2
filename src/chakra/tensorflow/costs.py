"""FLOPs of a TensorFlow op from its shapes: a table of rules.

:func:`op_flops` counts a multiply-add as 2 operations, as XLA's cost analysis and the PyTorch front
end do: ``MatMul`` (and Grappler's and oneDNN's fused forms) 2·M·N·K, batched matmuls the same per
batch, ``Conv2D`` 2·(output tensor_elements)·Kh·Kw·Cin and its two gradients alike, elementwise ops one per
output element, reductions one per input element. Other ops (data movement, variables, control)
count 0. Shapes come from ``_output_shapes``; an unknown dimension makes the count ``None``.

Example:
    >>> op_flops("MatMul", [[32, 64], [64, 128]], [[32, 128]], {})
    524288
    >>> op_flops("Relu", [[32, 128]], [[32, 128]], {})
    4096
"""

from __future__ import annotations

from collections.abc import Mapping

from chakra.tensorflow.graph import tensor_elements
from chakra.units import FLOPS_PER_MAC

Shape = list[int] | None
#: The boolean attributes :func:`op_flops` reads of a node (which side of a matmul is transposed).
FLAG_ATTRS = ("transpose_a", "adj_x")

MATMULS = frozenset({"MatMul", "_MklMatMul", "_FusedMatMul", "_MklFusedMatMul", "_MklNativeFusedMatMul"})
BATCH_MATMULS = frozenset({"BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "_MklBatchMatMulV2", "_FusedBatchMatMulV2"})
CONVOLUTIONS = frozenset({"Conv2D", "_FusedConv2D", "_MklConv2D", "_MklNativeConv2D", "_MklNativeFusedConv2D"})
CONV_INPUT_GRADIENTS = frozenset({"Conv2DBackpropInput", "_MklConv2DBackpropInput"})
CONV_FILTER_GRADIENTS = frozenset({"Conv2DBackpropFilter", "_MklConv2DBackpropFilter"})
ELEMENTWISE = frozenset(
    {
        "Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "Maximum", "Minimum", "Pow",
        "SquaredDifference", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "Neg", "Abs", "Sign",
        "Tanh", "Sigmoid", "Relu", "Relu6", "Elu", "Selu", "Softplus", "Gelu", "LeakyRelu",
        "ReluGrad", "Relu6Grad", "TanhGrad", "SigmoidGrad", "EluGrad", "SeluGrad", "SoftplusGrad",
        "BiasAdd", "BiasAddV1", "AddN", "Select", "SelectV2", "Cast", "Floor", "Ceil", "Round",
        "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr",
        "ApplyGradientDescent", "ResourceApplyGradientDescent", "AssignAddVariableOp", "AssignSubVariableOp",
        "Softmax", "LogSoftmax", "FusedBatchNormV3", "FusedBatchNormGradV3", "_MklFusedBatchNormV3",
    }
)  # fmt: skip
REDUCTIONS = frozenset({"Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "ArgMax", "ArgMin", "BiasAddGrad"})
#: The ops :func:`op_flops` reads input shapes for, and every op it counts from shapes (the rest count 0).
INPUT_SHAPED_OPS = MATMULS | BATCH_MATMULS | CONVOLUTIONS | CONV_INPUT_GRADIENTS | CONV_FILTER_GRADIENTS | REDUCTIONS
COUNTED_OPS = INPUT_SHAPED_OPS | ELEMENTWISE


def op_flops(op: str, inputs: list[Shape], outputs: list[Shape], flags: Mapping[str, bool]) -> int | None:
    """Operations of one execution of ``op`` with these input and output shapes; ``flags`` holds its
    boolean attributes (``transpose_a``, ``adj_x``). ``None``: a shape it needs is unknown."""
    first_out = outputs[0] if outputs else None
    if op in MATMULS:
        return _matmul(inputs, first_out, flags.get("transpose_a", False))
    if op in BATCH_MATMULS:
        return _matmul(inputs, first_out, flags.get("adj_x", False))
    if op in CONVOLUTIONS:
        return _conv(first_out, inputs[1] if len(inputs) > 1 else None)
    if op in CONV_INPUT_GRADIENTS:  # inputs: input sizes, filter, output gradient
        return _conv(inputs[2] if len(inputs) > 2 else None, inputs[1] if len(inputs) > 1 else None)
    if op in CONV_FILTER_GRADIENTS:  # inputs: input, filter sizes, output gradient; out: the filter
        gradient = inputs[2] if len(inputs) > 2 else None
        filter_elements, gradient_elements = tensor_elements(first_out), tensor_elements(gradient)
        if filter_elements is None or gradient_elements is None or not gradient:
            return None
        return FLOPS_PER_MAC * filter_elements * gradient_elements // max(1, gradient[-1])
    if op in ELEMENTWISE:
        return tensor_elements(first_out)
    if op in REDUCTIONS:
        return tensor_elements(inputs[0]) if inputs else None
    return 0


def _matmul(inputs: list[Shape], out: Shape, transposed: bool) -> int | None:
    a = inputs[0] if inputs else None
    out_elements = tensor_elements(out)
    if a is None or len(a) < 2 or out_elements is None:
        return None
    k = a[-2] if transposed else a[-1]
    return None if k < 0 else FLOPS_PER_MAC * out_elements * k


def _conv(out: Shape, kernel: Shape) -> int | None:
    """2 · output tensor_elements · Kh · Kw · Cin (the filter is HWIO)."""
    out_elements = tensor_elements(out)
    if out_elements is None or kernel is None or len(kernel) != 4 or min(kernel[:3]) < 0:
        return None
    return FLOPS_PER_MAC * out_elements * kernel[0] * kernel[1] * kernel[2]
