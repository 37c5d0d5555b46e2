"""FLOPs and bytes of the common PyTorch compute operators, from a host trace's shapes and types.

The PyTorch-to-Chakra converter writes ``num_ops`` (FLOPs) and ``tensor_size`` (bytes) on compute
nodes so that ASTRA-sim's roofline, ``t = max(num_ops / peak, tensor_size / bw)``, can time them
(``reference/workload-generators.md`` §1.1, §1.5). :func:`op_cost` computes both for one operator from
what the host execution trace records (``reference/pytorch-traces.md`` §1.6): per argument a shape
(``[64, 128]``; ``[]`` for scalars and 0-dim tensors; a list of shapes for tensor lists), a type string
(``"Tensor(c10::Half)"``, ``"GenericList[Tensor(float),Tensor(float)]"``, ``"Int"``, ...) and optionally
a value (``[tensor_id, storage_id, offset, numel, itemsize, device]`` for tensors, the scalar itself
for ``Int``/``Bool``/... arguments).

Units: ``num_ops`` in FLOPs, a multiply-add counting 2; ``tensor_size`` in bytes.

| family | operators (``aten::``; pointwise ones also as in-place ``x_``) | FLOPs |
|---|---|---|
| matmul | ``mm``, ``_scaled_mm``: ``[M,K]@[K,N]`` | ``2MKN`` |
| matmul | ``addmm(bias, mat1, mat2)`` | ``2MKN + MN`` |
| matmul | ``bmm``: ``[B,M,K]@[B,K,N]``; ``baddbmm``; ``addbmm`` | ``2BMKN``; ``+ BMN``; ``+ MN`` |
| matmul | ``matmul`` (batch dims broadcast; 1-D operands as ``torch.matmul``) | ``2·prod(batch)·MKN`` |
| matmul | ``linear(x [..., K], w [N, K], bias?)`` | ``2·rows·KN`` (``+ rows·N``) |
| matmul | ``mv``, ``addmv``; ``dot``, ``vdot`` | ``2MK`` (``+ M``); ``2K`` |
| convolution | ``convolution``, ``_convolution``, ``conv1d/2d/3d``, ``cudnn_convolution``, | (1) |
| | ``mkldnn_convolution``, ``convolution_overrideable`` | |
| convolution | transposed: the flag, ``conv_transpose1d/2d/3d``, ``cudnn_convolution_transpose`` | (2) |
| convolution | ``convolution_backward`` | (3) |
| elementwise | pointwise unary/binary/ternary ops; ``_foreach_*`` summed over the list | elements × constant |
| reduction | ``sum``, ``mean``, ``softmax``, ``var``, losses, pooling, ... | input elements × constant |
| normalization | layer/batch/group/instance norm, RMS norm, and their backward | input elements × constant |
| embedding | ``embedding``, ``embedding_bag``, ``_embedding_bag`` | ``numel(indices)·D`` gathered |
| embedding | ``embedding_backward``, ``embedding_dense_backward`` | ``numel(indices)·D`` adds |

1. ``2 · N · C_out · prod(out_spatial) · (C_in/groups) · prod(kernel)``, + ``numel(output)`` with a bias.
2. ``2 · N · C_in · prod(in_spatial) · (C_out/groups) · prod(kernel)`` (the weight is
   ``[C_in, C_out/groups, *kernel]``), + ``numel(output)`` with a bias.
3. the forward FLOPs for each of grad input and grad weight that ``output_mask`` requests, +
   ``numel(grad_output)`` for the bias grad.

Shapes are taken from the inputs; the output shape is needed only where the inputs do not fix it
(a non-transposed convolution's output spatial size, a bias add). ``groups`` never has to be read:
the weight's second dimension is already ``C_in/groups`` (``C_out/groups`` when transposed).

Per-element constants (a transcendental function counts as one FLOP, the convention behind the
reference's "softmax about 5"):

| constant | value | operators |
|---|---|---|
| ``SIMPLE_FLOPS`` | 1 | add, sub, mul, div, neg, abs, relu, clamp, where, masked_fill, comparisons, |
| | | threshold_backward, exp, log, sqrt, rsqrt, erf, sin, cos, tanh, pow, ... |
| ``SIGMOID_FLOPS`` | 3 | sigmoid, hardsigmoid, elu, softplus, log_sigmoid |
| ``SILU_FLOPS`` | 4 | silu, hardswish, mish |
| ``GELU_FLOPS`` | 8 | gelu |
| ``TERNARY_FLOPS`` | 3 | addcmul, addcdiv, lerp |
| ``DROPOUT_FLOPS`` | 2 | dropout, native_dropout, native_dropout_backward |
| ``SAVED_OUTPUT_BACKWARD_FLOPS`` | 3 | sigmoid_backward, tanh_backward |
| ``ACTIVATION_BACKWARD_FACTOR`` | 2 | gelu/silu/elu/softplus/hardswish backward = 2 × forward constant |
| ``REDUCE_FLOPS`` | 1 | sum, mean, amax, amin, max, min, argmax, argmin, prod, cumsum, any, all, pooling (+ backward) |
| ``VECTOR_NORM_FLOPS`` | 2 | norm, linalg_vector_norm |
| ``VARIANCE_FLOPS`` | 4 | var, std, var_mean, std_mean |
| ``SOFTMAX_FLOPS`` | 5 | softmax, _softmax, log_softmax, _log_softmax |
| ``LOGSUMEXP_FLOPS`` | 4 | logsumexp |
| ``SOFTMAX_BACKWARD_FLOPS`` | 4 | _softmax_backward_data, _log_softmax_backward_data |
| ``CROSS_ENTROPY_FLOPS`` | 5 | cross_entropy_loss (per logit) |
| ``MSE_FLOPS`` | 3 | mse_loss, mse_loss_backward |
| ``NLL_FLOPS_PER_TARGET`` | 1 | nll_loss family (per target, not per logit) |
| ``NORM_FLOPS`` / ``RMS_NORM_FLOPS`` | 5 / 4 | normalization forward |
| ``NORM_BACKWARD_FACTOR`` | 2 | normalization backward |
| ``GATHER_FLOPS`` | 1 | embedding lookups and gradient accumulation, per element |

Elements: pointwise ops count the elements of their largest tensor output (a list output: summed
over the list), or, when the trace lists no tensor output (``_foreach_add_``), of their largest
tensor input (the broadcast result); reductions and normalizations count their largest tensor input.

``tensor_size``: bytes of every tensor input (tensors inside lists included) + bytes of every tensor
output, a tensor's bytes being ``prod(shape) × dtype bytes``. Undefined tensors
(``Tensor(nullptr (uninitialized))``, e.g. a missing bias) count nothing. An in-place op whose trace
lists no output (``_foreach_mul_``) is also charged the write of its first input. Embedding lookups
count the gathered rows (``numel(indices) · D``), not the whole table, as the reference's
``w_w·T·h + w_a·T·h + 4·T`` does.

Deliberate choices:

* Embedding ``num_ops`` is the gathered element count, not 0: the reference (§1.1) warns that
  ASTRA-sim divides by ``num_ops`` (0 gives NaN) and asks for the element count for gathers.
* An op that touches nothing (empty tensors) gets ``None``, never a zero ``num_ops`` or
  ``tensor_size``: ASTRA-sim drops a node with ``tensor_size == 0`` as invalid (§1.1).
* ``copy_``, ``fill_``, ``zero_``, views, allocations, communication, annotations and ``einsum`` have
  no model (``None``).
* Host traces nest operators (``conv2d`` > ``convolution`` > ``_convolution`` > ``cudnn_convolution``;
  ``linear`` > ``addmm``; ``relu_`` > ``clamp_min_``; ``batch_norm`` > ``_batch_norm_impl_index`` >
  ``cudnn_batch_norm``; ``cross_entropy_loss`` > ``log_softmax`` > ``_log_softmax``). Every level
  gets the cost of the work beneath it; a caller summing costs must count one level per subtree.
* The transposed flag of ``convolution``/``_convolution``/``convolution_backward`` is read from
  ``input_values``; without values a convolution is taken as not transposed (by far the common case).

Example:
    >>> op_cost("aten::mm", [[16, 64], [64, 32]], ["Tensor(float)", "Tensor(float)"], [[16, 32]], ["Tensor(float)"])
    OpCost(num_ops=65536, tensor_size=14336, family='matmul')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Any

from chakra.units import FLOPS_PER_MAC

# ---------------------------------------------------------------------------------------------
# Constants


#: One add / multiply / compare / select, or one transcendental call, per element (§1.1: "add 1").
SIMPLE_FLOPS = 1
#: Sigmoid ``1/(1+exp(-x))``: exp, add, divide (the negation folds into the exponent); the same
#: budget covers hardsigmoid, ELU, softplus and log-sigmoid (one exp/log, an add, a multiply/select).
SIGMOID_FLOPS = 3
#: SiLU ``x·sigmoid(x)``: about 4 per element (§1.1); hardswish and mish budgeted alike.
SILU_FLOPS = 4
#: GELU (tanh form ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``): about 8 per element (§1.1).
GELU_FLOPS = 8
#: addcmul ``a + v·b·c``, addcdiv ``a + v·b/c``, lerp ``a + w·(b − a)``: three operations per element.
TERNARY_FLOPS = 3
#: Dropout: compare a random draw with ``p`` and scale the kept value; its backward: mask and scale.
DROPOUT_FLOPS = 2
#: Backward from the saved output: ``g·y·(1 − y)`` (sigmoid), ``g·(1 − y²)`` (tanh).
SAVED_OUTPUT_BACKWARD_FLOPS = 3
#: Backward recomputed from the input (GELU, SiLU, ELU, ...): the forward terms again plus the chain
#: rule's products, taken as twice the forward constant (an approximation; these ops are memory-bound).
ACTIVATION_BACKWARD_FACTOR = 2

#: Sum / mean / max / argmax / cumsum / pooling: one add or compare per input element.
REDUCE_FLOPS = 1
#: Vector norm: square and add per element (the final root is per output, negligible).
VECTOR_NORM_FLOPS = 2
#: Variance / standard deviation: the mean pass (1) then subtract, square, add (3).
VARIANCE_FLOPS = 4
#: Softmax: max, subtract, exp, sum, divide (§1.1 and §1.2's "about 5"); log-softmax alike.
SOFTMAX_FLOPS = 5
#: logsumexp: max, subtract, exp, sum (the log is per output, negligible).
LOGSUMEXP_FLOPS = 4
#: Softmax backward ``y·(g − Σ g·y)``: multiply, sum, subtract, multiply; log-softmax backward
#: ``g − exp(y)·Σ g``: sum, exp, multiply, subtract.
SOFTMAX_BACKWARD_FLOPS = 4
#: Cross-entropy over the logits: max, exp, sum, log, gather, about 5 per logit (§1.2).
CROSS_ENTROPY_FLOPS = 5
#: Mean squared error: subtract, square, sum; its backward ``2·(x − y)·g/n``: subtract and two multiplies.
MSE_FLOPS = 3
#: Negative log-likelihood reads one logit per target: one (weighted) add per target.
NLL_FLOPS_PER_TARGET = 1

#: Layer/batch/group norm forward: about 5 per element (§1.1 "LayerNorm about 5–8", §1.2 uses 5):
#: mean, variance, normalize, scale, shift.
NORM_FLOPS = 5
#: RMS norm forward: about 4 per element (§1.1): square, mean, scale by 1/rms, multiply by the weight.
RMS_NORM_FLOPS = 4
#: Normalization backward: about twice the forward (gradients of input, scale and shift).
NORM_BACKWARD_FACTOR = 2

#: Gathers have no arithmetic; §1.1 asks for the element count (never 0, which makes ASTRA-sim's
#: roofline divide 0 by 0). Embedding gradients do one accumulating add per element.
GATHER_FLOPS = 1

#: Bytes of one element per dtype as the host trace spells it inside ``Tensor(...)``.
DTYPE_BYTES: dict[str, int] = {
    "float": 4,
    "Float": 4,
    "double": 8,
    "Double": 8,
    "c10::Half": 2,
    "Half": 2,
    "c10::BFloat16": 2,
    "BFloat16": 2,
    "long": 8,
    "long int": 8,  # older traces (e.g. PARAM's linear_et) spell int64 this way
    "Long": 8,
    "int": 4,
    "Int": 4,
    "short": 2,
    "Short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "Byte": 1,
    "Char": 1,
    "bool": 1,
    "Bool": 1,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1,
    "c10::complex<c10::Half>": 4,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}

#: The type a trace gives an undefined tensor argument (a missing bias, an ungathered gradient).
UNDEFINED_TENSOR_PREFIX = "Tensor(nullptr"
_TENSOR_PREFIX = "Tensor("
_LIST_PREFIXES = ("GenericList[", "Tuple[", "List[")
#: Position of ``itemsize`` in a tensor value ``[tensor_id, storage_id, offset, numel, itemsize, device]``.
VALUE_ITEMSIZE_INDEX = 4

_TENSOR_TYPE_BYTES: dict[str, int] = {f"Tensor({name})": size for name, size in DTYPE_BYTES.items()}
#: Argument types that never hold a tensor, skipped without further parsing.
_SCALAR_TYPES = frozenset(["Int", "Double", "Bool", "None", "String", "Device", "Layout", "ScalarType", "Scalar"])
#: Item types of list type strings seen so far; bounded so odd traces cannot grow it without limit.
_LIST_ITEM_TYPES: dict[str, tuple[str, ...]] = {}
_LIST_ITEM_TYPES_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class OpCost:
    """Cost of one operator: ``num_ops`` FLOPs (multiply-add = 2), ``tensor_size`` bytes read +
    written, and the ``family`` of the model used (``"matmul"``, ``"convolution"``, ``"elementwise"``,
    ``"reduction"``, ``"normalization"``, ``"embedding"``)."""

    num_ops: int
    tensor_size: int
    family: str


# ---------------------------------------------------------------------------------------------
# Argument decoding


class _Op:
    """One operator's arguments plus per-argument element counts and bytes (0 for non-tensors)."""

    __slots__ = ("in_bytes", "in_numel", "in_shapes", "in_types", "in_values", "out_bytes", "out_numel", "out_shapes")

    def __init__(
        self,
        in_shapes: list[Any],
        in_types: list[Any],
        in_values: list[Any] | None,
        out_shapes: list[Any],
        in_sizes: tuple[list[int], list[int]],
        out_sizes: tuple[list[int], list[int]],
    ) -> None:
        self.in_shapes = in_shapes
        self.in_types = in_types
        self.in_values = in_values
        self.out_shapes = out_shapes
        self.in_numel, self.in_bytes = in_sizes
        self.out_numel, self.out_bytes = out_sizes

    def shape(self, index: int) -> list[int] | None:
        """Input ``index``'s shape when it is a list of non-negative ints, else ``None``."""
        return _shape(self.in_shapes[index]) if index < len(self.in_shapes) else None

    def out_shape(self, index: int) -> list[int] | None:
        """Output ``index``'s shape when it is a list of non-negative ints, else ``None``."""
        return _shape(self.out_shapes[index]) if index < len(self.out_shapes) else None

    def has_tensor(self, index: int) -> bool:
        """Whether input ``index`` is a defined tensor (an optional bias is present)."""
        return index < len(self.in_types) and _is_tensor_type(self.in_types[index])

    def flag(self, index: int) -> bool:
        """The ``Bool`` input ``index`` from the values; ``False`` when values are absent or odd."""
        values = self.in_values
        return values is not None and index < len(values) and values[index] is True


def _shape(shape: Any) -> list[int] | None:
    """``shape`` when it is a list of non-negative ints (symbolic and truncated shapes are not)."""
    if type(shape) is not list:
        return None
    for dim in shape:
        if type(dim) is not int or dim < 0:
            return None
    return shape


def _is_tensor_type(type_: Any) -> bool:
    """Whether a type string names a defined tensor."""
    if type_ in _TENSOR_TYPE_BYTES:
        return True
    return isinstance(type_, str) and type_.startswith(_TENSOR_PREFIX) and not type_.startswith(UNDEFINED_TENSOR_PREFIX)


def _list_item_types(type_: str) -> tuple[str, ...]:
    """Item types of ``"GenericList[Tensor(float),Int]"`` (parsed once per distinct string)."""
    items = _LIST_ITEM_TYPES.get(type_)
    if items is None:
        inner = type_[type_.index("[") + 1 : -1] if type_.endswith("]") else ""
        items = tuple(inner.split(",")) if inner else ()
        if len(_LIST_ITEM_TYPES) < _LIST_ITEM_TYPES_LIMIT:
            _LIST_ITEM_TYPES[type_] = items
    return items


def _numel(shape: Any) -> int | None:
    """Elements of ``shape`` when it is a list of non-negative ints (symbolic, truncated shapes are not)."""
    if type(shape) is not list:
        return None
    numel = 1
    for dim in shape:
        if type(dim) is not int or dim < 0:
            return None
        numel *= dim
    return numel


def _itemsize_from_value(value: Any) -> int | None:
    """The ``itemsize`` field of a tensor value, for a dtype string the table does not know."""
    if type(value) is not list or len(value) <= VALUE_ITEMSIZE_INDEX:
        return None
    itemsize = value[VALUE_ITEMSIZE_INDEX]
    return itemsize if type(itemsize) is int and itemsize > 0 else None


def _list_sizes(shapes: Any, type_: str, values: Any) -> tuple[int, int] | None:
    """``(numel, bytes)`` summed over the tensors of a list argument; ``None`` if unreadable."""
    items = _list_item_types(type_)
    if type(shapes) is not list or len(shapes) != len(items):
        return None  # a list cut at the trace's 4096-element limit, or a nested one
    if type(values) is not list or len(values) != len(items):
        values = None
    numel_sum = bytes_sum = 0
    for j, item_type in enumerate(items):
        if not _is_tensor_type(item_type):
            continue
        numel = _numel(shapes[j])
        itemsize = _TENSOR_TYPE_BYTES.get(item_type)
        if itemsize is None and values is not None:
            itemsize = _itemsize_from_value(values[j])
        if numel is None or itemsize is None:
            return None
        numel_sum += numel
        bytes_sum += numel * itemsize
    return numel_sum, bytes_sum


def _arg_sizes(shapes: list[Any], types: list[Any], values: list[Any] | None) -> tuple[list[int], list[int]] | None:
    """Per argument: elements and bytes of its tensors (a list's summed; 0 for non-tensors).

    ``None`` when the lists disagree in length (truncated) or a tensor's shape or dtype is unusable.
    """
    if type(shapes) is not list or type(types) is not list or len(shapes) != len(types):
        return None
    if values is not None and (type(values) is not list or len(values) != len(types)):
        values = None  # values only supply fallback itemsizes; misaligned ones are ignored
    numels = [0] * len(types)
    sizes = [0] * len(types)
    for i, type_ in enumerate(types):
        itemsize = _TENSOR_TYPE_BYTES.get(type_)
        if itemsize is not None:  # the common case: a tensor of a known dtype
            numel = _numel(shapes[i])
            if numel is None:
                return None
            numels[i] = numel
            sizes[i] = numel * itemsize
        elif type_ in _SCALAR_TYPES or not isinstance(type_, str):
            continue
        elif _is_tensor_type(type_):
            numel = _numel(shapes[i])
            itemsize = _itemsize_from_value(values[i]) if values is not None else None
            if numel is None or itemsize is None:
                return None
            numels[i] = numel
            sizes[i] = numel * itemsize
        elif type_.startswith(_LIST_PREFIXES) and _TENSOR_PREFIX in type_:
            list_size = _list_sizes(shapes[i], type_, values[i] if values is not None else None)
            if list_size is None:
                return None
            numels[i], sizes[i] = list_size
    return numels, sizes


# ---------------------------------------------------------------------------------------------
# Matmul family

Flops = Callable[[_Op], "int | None"]


def _gemm(a: list[int] | None, b: list[int] | None) -> tuple[int, int, int] | None:
    """``(M, K, N)`` of ``[M, K] @ [K, N]``."""
    if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    return a[0], a[1], b[1]


def _batched_gemm(a: list[int] | None, b: list[int] | None) -> tuple[int, int, int, int] | None:
    """``(B, M, K, N)`` of ``[B, M, K] @ [B, K, N]``."""
    if a is None or b is None or len(a) != 3 or len(b) != 3 or a[0] != b[0] or a[2] != b[1]:
        return None
    return a[0], a[1], a[2], b[2]


def _mm(op: _Op) -> int | None:
    """``mm``, ``_scaled_mm``: ``2MKN``."""
    mkn = _gemm(op.shape(0), op.shape(1))
    return None if mkn is None else FLOPS_PER_MAC * mkn[0] * mkn[1] * mkn[2]


def _addmm(op: _Op) -> int | None:
    """``addmm(bias, mat1, mat2)``: ``2MKN`` plus ``MN`` for the bias add."""
    mkn = _gemm(op.shape(1), op.shape(2))
    if mkn is None:
        return None
    m, k, n = mkn
    return FLOPS_PER_MAC * m * k * n + m * n


def _bmm(op: _Op) -> int | None:
    """``bmm``: ``2BMKN``."""
    bmkn = _batched_gemm(op.shape(0), op.shape(1))
    return None if bmkn is None else FLOPS_PER_MAC * prod(bmkn)


def _baddbmm(op: _Op) -> int | None:
    """``baddbmm(self, batch1, batch2)``: ``2BMKN`` plus ``BMN`` for the add."""
    bmkn = _batched_gemm(op.shape(1), op.shape(2))
    if bmkn is None:
        return None
    b, m, k, n = bmkn
    return FLOPS_PER_MAC * b * m * k * n + b * m * n


def _addbmm(op: _Op) -> int | None:
    """``addbmm(self, batch1, batch2)``: the batch of products summed into ``[M, N]``: ``2BMKN + MN``."""
    bmkn = _batched_gemm(op.shape(1), op.shape(2))
    if bmkn is None:
        return None
    b, m, k, n = bmkn
    return FLOPS_PER_MAC * b * m * k * n + m * n


def _mv(op: _Op) -> int | None:
    """``mv``: ``[M, K] @ [K]``: ``2MK``."""
    a, v = op.shape(0), op.shape(1)
    if a is None or v is None or len(a) != 2 or len(v) != 1 or a[1] != v[0]:
        return None
    return FLOPS_PER_MAC * a[0] * a[1]


def _addmv(op: _Op) -> int | None:
    """``addmv(self, mat, vec)``: ``2MK + M``."""
    a, v = op.shape(1), op.shape(2)
    if a is None or v is None or len(a) != 2 or len(v) != 1 or a[1] != v[0]:
        return None
    return FLOPS_PER_MAC * a[0] * a[1] + a[0]


def _dot(op: _Op) -> int | None:
    """``dot``, ``vdot``: ``[K] · [K]``: ``2K``."""
    a, b = op.shape(0), op.shape(1)
    if a is None or b is None or len(a) != 1 or a != b:
        return None
    return FLOPS_PER_MAC * a[0]


def _broadcast_numel(a: list[int], b: list[int]) -> int | None:
    """Elements of the broadcast of two batch shapes, ``None`` when they do not broadcast."""
    if len(a) < len(b):
        a, b = b, a
    offset = len(a) - len(b)
    total = prod(a[:offset])
    for x, y in zip(a[offset:], b, strict=True):
        if x == y or y == 1:
            total *= x
        elif x == 1:
            total *= y
        else:
            return None
    return total


def _matmul(op: _Op) -> int | None:
    """``matmul``: ``2 · prod(broadcast batch dims) · MKN``; a 1-D left operand has ``M = 1``, a 1-D
    right operand ``N = 1`` (so vector · vector is ``2K``)."""
    a, b = op.shape(0), op.shape(1)
    if not a or not b:
        return None
    m, k = (1, a[0]) if len(a) == 1 else (a[-2], a[-1])
    k_b, n = (b[0], 1) if len(b) == 1 else (b[-2], b[-1])
    if k != k_b:
        return None
    batch = _broadcast_numel(a[:-2], b[:-2])
    return None if batch is None else FLOPS_PER_MAC * batch * m * k * n


def _linear(op: _Op) -> int | None:
    """``linear(input [..., K], weight [N, K] or [K], bias?)``: ``2 · rows · KN`` (+ ``rows · N``)."""
    x, w = op.shape(0), op.shape(1)
    if not x or w is None or len(w) not in (1, 2):
        return None
    n, k_w = (1, w[0]) if len(w) == 1 else (w[0], w[1])
    rows, k = prod(x[:-1]), x[-1]
    if k != k_w:
        return None
    flops = FLOPS_PER_MAC * rows * k * n
    return flops + rows * n if op.has_tensor(2) else flops


# ---------------------------------------------------------------------------------------------
# Convolution family

#: Index of the ``transposed`` flag in ``convolution``, ``_convolution``, ``convolution_overrideable``.
CONV_TRANSPOSED_ARG = 6
#: ``convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
#: transposed, output_padding, groups, output_mask)``: positions of the flag and the mask.
CONV_BACKWARD_TRANSPOSED_ARG = 7
CONV_BACKWARD_MASK_ARG = 10
#: Grads a ``convolution_backward`` without an ``output_mask`` is taken to compute: input and weight.
DEFAULT_CONV_BACKWARD_MASK = (True, True, False)
#: Position of the optional bias in every forward convolution that has one.
CONV_BIAS_ARG = 2


def _channels_and_spatial(shape: list[int], rank: int, batched: bool) -> tuple[int, int, int] | None:
    """``(batch, channels, prod(spatial))`` of ``[N, C, *spatial]`` (or unbatched ``[C, *spatial]``)."""
    if batched:
        if len(shape) != rank:
            return None
        return shape[0], shape[1], prod(shape[2:])
    if len(shape) != rank - 1:
        return None
    return 1, shape[0], prod(shape[1:])


def _conv_flops(inp: list[int] | None, weight: list[int] | None, out: list[int] | None, transposed: bool) -> int | None:
    """FLOPs of one convolution without its bias, from input, weight and (non-transposed) output shapes.

    ``weight[1]`` is ``C_in/groups`` (``C_out/groups`` when transposed), so ``groups`` is not needed.
    """
    if inp is None or weight is None or len(weight) < 3:
        return None
    rank = len(weight)
    batched = len(inp) == rank
    nc_in = _channels_and_spatial(inp, rank, batched)
    if nc_in is None:
        return None
    n, c_in, in_spatial = nc_in
    kernel = prod(weight[2:])
    if transposed:
        if c_in != weight[0]:
            return None
        return FLOPS_PER_MAC * n * c_in * in_spatial * weight[1] * kernel
    nc_out = None if out is None else _channels_and_spatial(out, rank, batched)
    if nc_out is None or nc_out[0] != n or nc_out[1] != weight[0] or weight[1] == 0 or c_in % weight[1]:
        return None
    return FLOPS_PER_MAC * n * nc_out[1] * nc_out[2] * weight[1] * kernel


def _convolution(transposed_arg: int | None, always_transposed: bool = False) -> Flops:
    """Forward convolution handler: the flag at ``transposed_arg`` (or ``always_transposed``), bias at
    input 2 when that is a tensor (its add costs one FLOP per output element)."""

    def flops(op: _Op) -> int | None:
        transposed = always_transposed or (transposed_arg is not None and op.flag(transposed_arg))
        out = op.out_shape(0)
        conv = _conv_flops(op.shape(0), op.shape(1), out, transposed)
        if conv is None or not op.has_tensor(CONV_BIAS_ARG):
            return conv
        return None if out is None else conv + prod(out)

    return flops


def _backward_mask(op: _Op) -> tuple[bool, bool, bool]:
    """Which of (grad_input, grad_weight, grad_bias) ``convolution_backward`` computes: its
    ``output_mask`` value, else the defined tensors among its outputs, else input and weight."""
    values = op.in_values
    if values is not None and len(values) > CONV_BACKWARD_MASK_ARG:
        mask = values[CONV_BACKWARD_MASK_ARG]
        if type(mask) is list and len(mask) == len(DEFAULT_CONV_BACKWARD_MASK) and all(type(m) is bool for m in mask):
            return mask[0], mask[1], mask[2]
    out_bytes = op.out_bytes
    if len(out_bytes) == len(DEFAULT_CONV_BACKWARD_MASK) and any(out_bytes):
        return out_bytes[0] > 0, out_bytes[1] > 0, out_bytes[2] > 0
    return DEFAULT_CONV_BACKWARD_MASK


def _convolution_backward(op: _Op) -> int | None:
    """``convolution_backward``: forward FLOPs for each of grad input and grad weight requested,
    plus one add per grad-output element for the bias grad."""
    grad_out = op.shape(0)
    forward = _conv_flops(op.shape(1), op.shape(2), grad_out, op.flag(CONV_BACKWARD_TRANSPOSED_ARG))
    if forward is None or grad_out is None:
        return None
    want_input, want_weight, want_bias = _backward_mask(op)
    return forward * (want_input + want_weight) + (prod(grad_out) if want_bias else 0)


# ---------------------------------------------------------------------------------------------
# Per-element families (elementwise, reduction, normalization)


def _pointwise(flops_per_element: int) -> Flops:
    """Elements of the largest tensor output (else of the largest input) × ``flops_per_element``."""

    def flops(op: _Op) -> int:
        elements = max(op.out_numel, default=0) or max(op.in_numel, default=0)
        return elements * flops_per_element

    return flops


def _per_input_element(flops_per_element: int) -> Flops:
    """Elements of the largest tensor input × ``flops_per_element`` (reductions, normalizations)."""

    def flops(op: _Op) -> int:
        return max(op.in_numel, default=0) * flops_per_element

    return flops


def _per_element_of(arg: int, flops_per_element: int) -> Flops:
    """Elements of input ``arg`` × ``flops_per_element`` (the targets of an NLL loss)."""

    def flops(op: _Op) -> int | None:
        return op.in_numel[arg] * flops_per_element if arg < len(op.in_numel) else None

    return flops


# ---------------------------------------------------------------------------------------------
# Embedding family

#: ``embedding(weight, indices)``, ``embedding_bag(weight, indices, offsets, ...)``.
EMBEDDING_WEIGHT_ARG = 0
EMBEDDING_INDICES_ARG = 1


def _gathered_elements(op: _Op) -> int | None:
    """``numel(indices) · D`` of a lookup in a ``[V, D]`` table."""
    weight = op.shape(EMBEDDING_WEIGHT_ARG)
    if weight is None or len(weight) != 2 or len(op.in_numel) <= EMBEDDING_INDICES_ARG:
        return None
    return op.in_numel[EMBEDDING_INDICES_ARG] * weight[1]


def _embedding_lookup(op: _Op) -> int | None:
    """Lookups: one element moved per gathered element (``GATHER_FLOPS``)."""
    gathered = _gathered_elements(op)
    return None if gathered is None else gathered * GATHER_FLOPS


def _embedding_lookup_bytes(op: _Op) -> int | None:
    """Lookup bytes: the gathered rows instead of the whole table, plus the other inputs and outputs."""
    gathered = _gathered_elements(op)
    table_numel = op.in_numel[EMBEDDING_WEIGHT_ARG]
    if gathered is None or table_numel == 0:
        return None
    itemsize = op.in_bytes[EMBEDDING_WEIGHT_ARG] // table_numel
    other_inputs = sum(op.in_bytes) - op.in_bytes[EMBEDDING_WEIGHT_ARG]
    return other_inputs + gathered * itemsize + sum(op.out_bytes)


def _embedding_backward(op: _Op) -> int | None:
    """``embedding_(dense_)backward(grad [..., D], indices, ...)``: one add per ``numel(indices) · D``."""
    grad = op.shape(0)
    if not grad or len(op.in_numel) <= EMBEDDING_INDICES_ARG:
        return None
    return op.in_numel[EMBEDDING_INDICES_ARG] * grad[-1] * GATHER_FLOPS


# ---------------------------------------------------------------------------------------------
# The table

Bytes = Callable[[_Op], "int | None"]


def _all_bytes(op: _Op) -> int:
    """Bytes of every tensor input and output."""
    return sum(op.in_bytes) + sum(op.out_bytes)


@dataclass(frozen=True, slots=True)
class _Model:
    family: str
    flops: Flops
    bytes: Bytes = _all_bytes
    #: An in-place op: when the trace lists no tensor output, its first input is also written.
    in_place: bool = False
    #: Reads flags of its input values (a convolution's ``transposed``, ``output_mask``).
    reads_flags: bool = False


_MATMUL: dict[str, Flops] = {
    "mm": _mm,
    "_scaled_mm": _mm,
    "addmm": _addmm,
    "bmm": _bmm,
    "baddbmm": _baddbmm,
    "addbmm": _addbmm,
    "matmul": _matmul,
    "linear": _linear,
    "mv": _mv,
    "addmv": _addmv,
    "dot": _dot,
    "vdot": _dot,
}

_CONVOLUTION: dict[str, Flops] = {
    "convolution": _convolution(CONV_TRANSPOSED_ARG),
    "_convolution": _convolution(CONV_TRANSPOSED_ARG),
    "convolution_overrideable": _convolution(CONV_TRANSPOSED_ARG),
    "conv1d": _convolution(None),
    "conv2d": _convolution(None),
    "conv3d": _convolution(None),
    "cudnn_convolution": _convolution(None),
    "mkldnn_convolution": _convolution(None),
    "conv_transpose1d": _convolution(None, always_transposed=True),
    "conv_transpose2d": _convolution(None, always_transposed=True),
    "conv_transpose3d": _convolution(None, always_transposed=True),
    "cudnn_convolution_transpose": _convolution(None, always_transposed=True),
    "convolution_backward": _convolution_backward,
}

#: Pointwise ops by FLOPs per element; each also gets its in-place ``x_`` form and, where PyTorch
#: has one, its ``_foreach_x`` / ``_foreach_x_`` list forms.
_POINTWISE: dict[str, int] = {
    **dict.fromkeys(
        [
            "add",
            "sub",
            "rsub",
            "mul",
            "div",
            "true_divide",
            "neg",
            "abs",
            "sign",
            "reciprocal",
            "square",
            "maximum",
            "minimum",
            "fmod",
            "remainder",
            "floor",
            "ceil",
            "round",
            "trunc",
            "relu",
            "relu6",
            "threshold",
            "threshold_backward",
            "clamp",
            "clamp_min",
            "clamp_max",
            "hardtanh",
            "hardtanh_backward",
            "leaky_relu",
            "leaky_relu_backward",
            "where",
            "masked_fill",
            "eq",
            "ne",
            "lt",
            "le",
            "gt",
            "ge",
            "logical_not",
            "logical_and",
            "logical_or",
            "exp",
            "exp2",
            "expm1",
            "log",
            "log2",
            "log10",
            "log1p",
            "sqrt",
            "rsqrt",
            "pow",
            "erf",
            "sin",
            "cos",
            "tanh",
        ],
        SIMPLE_FLOPS,
    ),
    **dict.fromkeys(["sigmoid", "hardsigmoid", "elu", "softplus", "log_sigmoid_forward"], SIGMOID_FLOPS),
    **dict.fromkeys(["silu", "hardswish", "mish"], SILU_FLOPS),
    "gelu": GELU_FLOPS,
    **dict.fromkeys(["addcmul", "addcdiv", "lerp"], TERNARY_FLOPS),
    **dict.fromkeys(["dropout", "native_dropout", "native_dropout_backward"], DROPOUT_FLOPS),
    **dict.fromkeys(["sigmoid_backward", "tanh_backward"], SAVED_OUTPUT_BACKWARD_FLOPS),
    "gelu_backward": GELU_FLOPS * ACTIVATION_BACKWARD_FACTOR,
    "silu_backward": SILU_FLOPS * ACTIVATION_BACKWARD_FACTOR,
    "mish_backward": SILU_FLOPS * ACTIVATION_BACKWARD_FACTOR,
    "hardswish_backward": SILU_FLOPS * ACTIVATION_BACKWARD_FACTOR,
    "elu_backward": SIGMOID_FLOPS * ACTIVATION_BACKWARD_FACTOR,
    "softplus_backward": SIGMOID_FLOPS * ACTIVATION_BACKWARD_FACTOR,
    "hardsigmoid_backward": SIGMOID_FLOPS * ACTIVATION_BACKWARD_FACTOR,
}

#: Pointwise ops with ``_foreach_`` list forms in PyTorch.
_FOREACH = [
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "abs",
    "sign",
    "reciprocal",
    "maximum",
    "minimum",
    "clamp_min",
    "clamp_max",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "pow",
    "sigmoid",
    "tanh",
    "addcmul",
    "addcdiv",
    "lerp",
]

_REDUCTION: dict[str, Flops] = {
    **dict.fromkeys(
        [
            "sum",
            "mean",
            "nansum",
            "nanmean",
            "amax",
            "amin",
            "aminmax",
            "max",
            "min",
            "argmax",
            "argmin",
            "prod",
            "cumsum",
            "cumprod",
            "any",
            "all",
            # pooling: one compare/add per input element (window overlap ignored; memory-bound)
            "max_pool1d",
            "max_pool2d",
            "max_pool3d",
            "max_pool2d_with_indices",
            "max_pool3d_with_indices",
            "avg_pool1d",
            "avg_pool2d",
            "avg_pool3d",
            "adaptive_avg_pool1d",
            "adaptive_avg_pool2d",
            "adaptive_avg_pool3d",
            "_adaptive_avg_pool2d",
            "_adaptive_avg_pool3d",
            "adaptive_max_pool2d",
            "max_pool2d_with_indices_backward",
            "max_pool3d_with_indices_backward",
            "avg_pool2d_backward",
            "avg_pool3d_backward",
            "_adaptive_avg_pool2d_backward",
            "_adaptive_avg_pool3d_backward",
        ],
        _per_input_element(REDUCE_FLOPS),
    ),
    **dict.fromkeys(["norm", "linalg_vector_norm"], _per_input_element(VECTOR_NORM_FLOPS)),
    **dict.fromkeys(["var", "std", "var_mean", "std_mean"], _per_input_element(VARIANCE_FLOPS)),
    **dict.fromkeys(["softmax", "_softmax", "log_softmax", "_log_softmax"], _per_input_element(SOFTMAX_FLOPS)),
    "logsumexp": _per_input_element(LOGSUMEXP_FLOPS),
    **dict.fromkeys(
        ["_softmax_backward_data", "_log_softmax_backward_data"], _per_input_element(SOFTMAX_BACKWARD_FLOPS)
    ),
    "cross_entropy_loss": _per_input_element(CROSS_ENTROPY_FLOPS),
    **dict.fromkeys(["mse_loss", "mse_loss_backward"], _per_input_element(MSE_FLOPS)),
    # nll_loss*(self, target, ...) and nll_loss*_backward(grad_output, self, target, ...)
    **dict.fromkeys(
        ["nll_loss", "nll_loss_nd", "nll_loss_forward", "nll_loss2d_forward"],
        _per_element_of(1, NLL_FLOPS_PER_TARGET),
    ),
    **dict.fromkeys(["nll_loss_backward", "nll_loss2d_backward"], _per_element_of(2, NLL_FLOPS_PER_TARGET)),
}

_NORM_FORWARD = [
    "layer_norm",
    "native_layer_norm",
    "batch_norm",
    "native_batch_norm",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training",
    "_batch_norm_impl_index",
    "cudnn_batch_norm",
    "miopen_batch_norm",
    "group_norm",
    "native_group_norm",
    "instance_norm",
]
_NORM_BACKWARD = [
    "native_layer_norm_backward",
    "native_batch_norm_backward",
    "batch_norm_backward",
    "_batch_norm_impl_index_backward",
    "cudnn_batch_norm_backward",
    "miopen_batch_norm_backward",
    "native_group_norm_backward",
]
_NORMALIZATION: dict[str, Flops] = {
    **dict.fromkeys(_NORM_FORWARD, _per_input_element(NORM_FLOPS)),
    **dict.fromkeys(_NORM_BACKWARD, _per_input_element(NORM_FLOPS * NORM_BACKWARD_FACTOR)),
    **dict.fromkeys(["rms_norm", "_fused_rms_norm"], _per_input_element(RMS_NORM_FLOPS)),
    "_fused_rms_norm_backward": _per_input_element(RMS_NORM_FLOPS * NORM_BACKWARD_FACTOR),
}


def _build_models() -> dict[str, _Model]:
    """The model of every modeled operator, keyed by its full ``aten::`` name."""
    models: dict[str, _Model] = {}
    for name, fn in _MATMUL.items():
        models[name] = _Model("matmul", fn)
    for name, fn in _CONVOLUTION.items():
        models[name] = _Model("convolution", fn, reads_flags=True)
    for name, per_element in _POINTWISE.items():
        models[name] = _Model("elementwise", _pointwise(per_element))
        models[name + "_"] = _Model("elementwise", _pointwise(per_element), in_place=True)
    for name in _FOREACH:
        per_element = _POINTWISE[name]
        models["_foreach_" + name] = _Model("elementwise", _pointwise(per_element))
        models["_foreach_" + name + "_"] = _Model("elementwise", _pointwise(per_element), in_place=True)
    for name, fn in _REDUCTION.items():
        models[name] = _Model("reduction", fn)
    for name, fn in _NORMALIZATION.items():
        models[name] = _Model("normalization", fn)
    for name in ("embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only"):
        models[name] = _Model("embedding", _embedding_lookup, _embedding_lookup_bytes)
    for name in ("embedding_backward", "embedding_dense_backward"):
        models[name] = _Model("embedding", _embedding_backward)
    return {"aten::" + name: model for name, model in models.items()}


_MODELS = _build_models()

#: Full names (``"aten::mm"``) of the operators :func:`op_cost` models; others always give ``None``.
MODELED_OPS: frozenset[str] = frozenset(_MODELS)


def reads_values(name: str, input_types: list[Any]) -> bool:
    """Whether :func:`op_cost` of ``name`` reads its input values with these input types: models
    that read flags (convolutions) and tensors whose dtype string the table does not know (their
    itemsize is in the value). Where it does not, the cost is a function of the name, shapes and
    types alone, so callers may reuse it for ops that repeat them.

    >>> reads_values("aten::mm", ["Tensor(float)", "Tensor(float)"]), reads_values("aten::convolution", [])
    (False, True)
    >>> reads_values("aten::mm", ["Tensor(float8_e4m3fnuz_x)", "Tensor(float)"])
    True
    """
    model = _MODELS.get(name)
    if model is None:
        return False
    if model.reads_flags or type(input_types) is not list:
        return True
    for type_ in input_types:
        if type(type_) is not str or type_ in _TENSOR_TYPE_BYTES or type_ in _SCALAR_TYPES:
            continue
        if type_.startswith(_LIST_PREFIXES) and all(
            item in _TENSOR_TYPE_BYTES or not _is_tensor_type(item) for item in _list_item_types(type_)
        ):
            continue
        if not _is_tensor_type(type_) and not type_.startswith(_LIST_PREFIXES):
            continue  # another kind of argument: never sized
        return True
    return False


def op_cost(
    name: str,
    input_shapes: list[Any],
    input_types: list[Any],
    output_shapes: list[Any],
    output_types: list[Any],
    input_values: list[Any] | None = None,
) -> OpCost | None:
    """FLOPs and bytes of operator ``name`` from its host-trace shapes, types (and values).

    ``input_values`` supply the transposed flag and ``output_mask`` of convolutions and the itemsize
    of tensors whose dtype string is unknown. Returns ``None`` for operators without a model and
    for arguments that cannot be read (truncated or symbolic shapes, missing outputs, an unknown
    dtype without values, shapes that do not fit the operator); it never raises for such input.
    """
    model = _MODELS.get(name)
    if model is None:
        return None
    try:
        in_sizes = _arg_sizes(input_shapes, input_types, input_values)
        out_sizes = _arg_sizes(output_shapes, output_types, None)
        if in_sizes is None or out_sizes is None:
            return None
        op = _Op(input_shapes, input_types, input_values, output_shapes, in_sizes, out_sizes)
        num_ops = model.flops(op)
        tensor_size = model.bytes(op)
        if model.in_place and tensor_size is not None and not any(op.out_bytes) and op.in_bytes:
            tensor_size += op.in_bytes[0]  # written in place; the trace lists no output for it
    except (TypeError, ValueError, IndexError, AttributeError):
        # The checks above cover the shapes seen in real traces; anything odder is "no model".
        return None
    if not num_ops or not tensor_size or num_ops < 0 or tensor_size < 0:
        return None  # nothing touched: ASTRA-sim rejects zero sizes (reference §1.1)
    return OpCost(num_ops, tensor_size, model.family)
