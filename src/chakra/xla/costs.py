"""What an HLO instruction computes and moves: FLOPs and bytes, per device, from its shapes.

The model follows XLA's own cost analysis where it is stated plainly: a ``dot`` is ``2·M·N·K``
(output elements times the contracted size, a multiply and an add each), a ``convolution`` two
FLOPs per output element and kernel element of one output feature, an elementwise op one FLOP per
output element (transcendental ones, such as ``exponential``, count as XLA's separate
"transcendentals" and not as FLOPs), a ``reduce`` one per input element, an all-reduce one per
output element (its reduction), and data movement
(copy, transpose, slice, broadcast, ...) none. A ``fusion`` or ``call`` is the sum of its body. Bytes
are what a node reads and writes at its boundary: its operands and its result.

Example:
    module = load_module("step.pb")
    instruction_flops(module, module.scheduled()[5])
"""

from __future__ import annotations

import math

from chakra.schema.xla.hlo_subset_pb2 import HloInstructionProto, ShapeProto
from chakra.units import FLOPS_PER_MAC
from chakra.xla.hlo import TUPLE, HloModule, shape_bytes

#: Elementwise opcodes XLA counts as one FLOP per output element.
ELEMENTWISE = frozenset(
    {
        "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "negate", "abs", "sign",
        "compare", "select", "clamp", "and", "or", "xor", "not", "floor", "ceil", "round-nearest-afz",
        "round-nearest-even", "atan2", "shift-left", "shift-right-arithmetic", "shift-right-logical",
    }
)  # fmt: skip
#: Elementwise opcodes XLA counts as transcendentals, not FLOPs.
TRANSCENDENTAL = frozenset(
    {"exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sqrt", "rsqrt", "cbrt",
     "power", "sine", "cosine", "tan", "erf"}
)  # fmt: skip
#: Collectives XLA counts as one FLOP (the reduction's add) per output element.
REDUCING_COLLECTIVES = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter"})
#: Opcodes whose cost is their called computation's.
CALLS_BODY = frozenset({"fusion", "call"})


def elements(shape: ShapeProto) -> int:
    """Array elements of a shape (summed over a tuple's parts)."""
    if shape.element_type == TUPLE:
        return sum(elements(part) for part in shape.tuple_shapes)
    return math.prod(shape.dimensions)


def instruction_flops(module: HloModule, instruction: HloInstructionProto) -> int:
    """FLOPs of one instruction on one device (a fusion's or call's body summed)."""
    op = instruction.opcode
    if op in CALLS_BODY:
        return sum(
            instruction_flops(module, inner)
            for body in instruction.called_computation_ids
            for inner in module.computations[body].instructions
        )
    if op == "dot":
        lhs = module.instructions[instruction.operand_ids[0]].shape
        contracted = math.prod(lhs.dimensions[d] for d in instruction.dot_dimension_numbers.lhs_contracting_dimensions)
        return FLOPS_PER_MAC * elements(instruction.shape) * contracted
    if op == "convolution":
        kernel = module.instructions[instruction.operand_ids[1]].shape
        out_features = kernel.dimensions[instruction.convolution_dimension_numbers.kernel_output_feature_dimension]
        per_output = elements(kernel) // max(1, out_features)
        return FLOPS_PER_MAC * elements(instruction.shape) * per_output
    if op in ELEMENTWISE:
        return elements(instruction.shape)
    if op == "reduce":
        return elements(module.instructions[instruction.operand_ids[0]].shape)
    if op in REDUCING_COLLECTIVES:
        return elements(instruction.shape)
    return 0


def instruction_bytes(module: HloModule, instruction: HloInstructionProto) -> int:
    """Bytes one instruction reads and writes at its boundary on one device: its operands and result."""
    reads = sum(shape_bytes(module.instructions[o].shape) for o in instruction.operand_ids)
    return reads + shape_bytes(instruction.shape)
