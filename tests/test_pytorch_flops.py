"""chakra.pytorch.flops: FLOPs (``num_ops``) and bytes (``tensor_size``) of PyTorch operators.

Expectations are computed by hand from the formulas in the module docstring; float32 tensors take
4 bytes per element, so a tensor's bytes read ``4 * numel``.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from helpers import require_shared
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra.pytorch.flops import (
    CROSS_ENTROPY_FLOPS,
    GELU_FLOPS,
    MODELED_OPS,
    NORM_BACKWARD_FACTOR,
    NORM_FLOPS,
    SOFTMAX_FLOPS,
    OpCost,
    op_cost,
    reads_values,
)
from chakra.pytorch.host import load_host_trace

F32 = "Tensor(float)"
F16 = "Tensor(c10::Half)"
I64 = "Tensor(long)"
UNDEFINED = "Tensor(nullptr (uninitialized))"
INTS2 = "GenericList[Int,Int]"


def f32(*numels: int) -> int:
    """Bytes of float32 tensors with these element counts."""
    return 4 * sum(numels)


# ---------------------------------------------------------------------------------------------
# matmul


def test_mm_counts_two_flops_per_multiply_add():
    cost = op_cost("aten::mm", [[16, 64], [64, 32]], [F32, F32], [[16, 32]], [F32])
    assert cost == OpCost(2 * 16 * 64 * 32, f32(16 * 64, 64 * 32, 16 * 32), "matmul")


def test_addmm_adds_one_flop_per_output_for_the_bias():
    cost = op_cost("aten::addmm", [[64], [16, 64], [64, 64], [], []], [F32, F32, F32, "Int", "Int"], [[16, 64]], [F32])
    assert cost == OpCost(2 * 16 * 64 * 64 + 16 * 64, f32(64, 16 * 64, 64 * 64, 16 * 64), "matmul")


def test_bmm_multiplies_by_the_batch():
    cost = op_cost("aten::bmm", [[8, 16, 32], [8, 32, 4]], [F32, F32], [[8, 16, 4]], [F32])
    assert cost is not None and cost.num_ops == 2 * 8 * 16 * 32 * 4


def test_baddbmm_adds_the_batched_bias():
    cost = op_cost("aten::baddbmm", [[8, 16, 4], [8, 16, 32], [8, 32, 4]], [F32] * 3, [[8, 16, 4]], [F32])
    assert cost is not None and cost.num_ops == 2 * 8 * 16 * 32 * 4 + 8 * 16 * 4


def test_matmul_broadcasts_batch_dimensions():
    # [2, 1, 8, 16] @ [3, 16, 4] -> [2, 3, 8, 4]
    cost = op_cost("aten::matmul", [[2, 1, 8, 16], [3, 16, 4]], [F32, F32], [[2, 3, 8, 4]], [F32])
    assert cost is not None and cost.num_ops == 2 * (2 * 3) * 8 * 16 * 4


@pytest.mark.parametrize(
    ("shapes", "flops"),
    [
        ([[16], [16]], 2 * 16),  # vector · vector
        ([[8, 16], [16]], 2 * 8 * 16),  # matrix · vector
        ([[16], [16, 4]], 2 * 16 * 4),  # vector · matrix
        ([[5, 8, 16], [16]], 2 * 5 * 8 * 16),  # batched matrix · vector
    ],
)
def test_matmul_treats_1d_operands_like_torch_matmul(shapes, flops):
    cost = op_cost("aten::matmul", shapes, [F32, F32], [], [])
    assert cost is not None and cost.num_ops == flops


def test_matmul_with_mismatched_inner_dimensions_has_no_model():
    assert op_cost("aten::matmul", [[8, 16], [15, 4]], [F32, F32], [[8, 4]], [F32]) is None


def test_linear_flattens_leading_dimensions_and_counts_the_bias():
    # input [4, 10, 32] (40 rows), weight [64, 32], bias [64] -> output [4, 10, 64]
    cost = op_cost("aten::linear", [[4, 10, 32], [64, 32], [64]], [F32] * 3, [[4, 10, 64]], [F32])
    assert cost == OpCost(2 * 40 * 32 * 64 + 40 * 64, f32(4 * 10 * 32, 64 * 32, 64, 4 * 10 * 64), "matmul")


def test_linear_without_bias_counts_only_the_gemm():
    cost = op_cost("aten::linear", [[40, 32], [64, 32], []], [F32, F32, "None"], [[40, 64]], [F32])
    assert cost is not None and cost.num_ops == 2 * 40 * 32 * 64


def test_matrix_vector_and_dot_products():
    mv = op_cost("aten::mv", [[8, 16], [16]], [F32, F32], [[8]], [F32])
    addmv = op_cost("aten::addmv", [[8], [8, 16], [16]], [F32] * 3, [[8]], [F32])
    dot = op_cost("aten::dot", [[16], [16]], [F32, F32], [[]], [F32])
    assert mv is not None and addmv is not None and dot is not None
    assert (mv.num_ops, addmv.num_ops, dot.num_ops) == (2 * 8 * 16, 2 * 8 * 16 + 8, 2 * 16)


# ---------------------------------------------------------------------------------------------
# convolution

CONV2D_TYPES = [F32, F32, F32, INTS2, INTS2, INTS2, "Int"]


def test_conv2d_counts_macs_over_the_output_and_the_bias_add():
    # N=2, C_in=3, 8x8, C_out=4, 3x3 kernel, padding 1 -> output [2, 4, 8, 8]
    shapes = [[2, 3, 8, 8], [4, 3, 3, 3], [4], [[], []], [[], []], [[], []], []]
    cost = op_cost("aten::conv2d", shapes, CONV2D_TYPES, [[2, 4, 8, 8]], [F32])
    output_numel = 2 * 4 * 8 * 8
    assert cost == OpCost(
        2 * 2 * 4 * 64 * 3 * 9 + output_numel,
        f32(2 * 3 * 64, 4 * 3 * 9, 4, output_numel),
        "convolution",
    )


def test_convolution_without_bias_skips_the_bias_add():
    # aten::convolution marks a missing bias as an undefined tensor
    shapes = [[2, 3, 8, 8], [4, 3, 3, 3], [], [[], []], [[], []], [[], []], [], [[], []], []]
    types = [F32, F32, UNDEFINED, INTS2, INTS2, INTS2, "Bool", INTS2, "Int"]
    values = [None, None, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1]
    cost = op_cost("aten::convolution", shapes, types, [[2, 4, 8, 8]], [F32], values)
    assert cost is not None and cost.num_ops == 2 * 2 * 4 * 64 * 3 * 9


def test_grouped_convolution_counts_input_channels_per_group():
    # C_in=8 in 4 groups: weight [16, 8/4, 3, 3]; 8x8 without padding -> 6x6
    shapes = [[1, 8, 8, 8], [16, 2, 3, 3], [], [[], []], [[], []], [[], []], []]
    types = [F32, F32, "None", INTS2, INTS2, INTS2, "Int"]
    cost = op_cost("aten::conv2d", shapes, types, [[1, 16, 6, 6]], [F32])
    assert cost is not None and cost.num_ops == 2 * 1 * 16 * 36 * 2 * 9


TRANSPOSED_SHAPES = [[1, 8, 4, 4], [8, 2, 3, 3], [], [[], []], [[], []], [[], []], [], [[], []], []]
TRANSPOSED_TYPES = [F32, F32, UNDEFINED, INTS2, INTS2, INTS2, "Bool", INTS2, "Int"]
#: stride 2, no padding, groups 2: weight [C_in=8, C_out/groups=2, 3, 3], output [1, 4, 9, 9].
TRANSPOSED_VALUES = [None, None, None, [2, 2], [0, 0], [1, 1], True, [0, 0], 2]
#: 2 · N · C_in · prod(in_spatial) · (C_out/groups) · prod(kernel)
TRANSPOSED_FLOPS = 2 * 1 * 8 * 16 * 2 * 9


def test_transposed_convolution_counts_macs_over_the_input():
    cost = op_cost("aten::convolution", TRANSPOSED_SHAPES, TRANSPOSED_TYPES, [[1, 4, 9, 9]], [F32], TRANSPOSED_VALUES)
    assert cost is not None and cost.num_ops == TRANSPOSED_FLOPS


def test_conv_transpose2d_is_always_transposed():
    shapes = [[1, 8, 4, 4], [8, 2, 3, 3], [], [[], []], [[], []], [[], []], [], [[], []]]
    types = [F32, F32, "None", INTS2, INTS2, INTS2, "Int", INTS2]
    cost = op_cost("aten::conv_transpose2d", shapes, types, [[1, 4, 9, 9]], [F32])
    assert cost is not None and cost.num_ops == TRANSPOSED_FLOPS


def test_without_values_a_convolution_is_taken_as_not_transposed():
    # read as a plain convolution the shapes do not fit (C_out 4 != weight[0] 8): no model
    assert op_cost("aten::convolution", TRANSPOSED_SHAPES, TRANSPOSED_TYPES, [[1, 4, 9, 9]], [F32]) is None


def test_unbatched_conv2d_input_counts_a_batch_of_one():
    shapes = [[3, 8, 8], [4, 3, 3, 3], [], [[], []], [[], []], [[], []], []]
    types = [F32, F32, "None", INTS2, INTS2, INTS2, "Int"]
    cost = op_cost("aten::conv2d", shapes, types, [[4, 8, 8]], [F32])
    assert cost is not None and cost.num_ops == 2 * 4 * 64 * 3 * 9


def test_convolution_without_its_output_shape_has_no_model():
    shapes = [[2, 3, 8, 8], [4, 3, 3, 3], [], [[], []], [[], []], [[], []], []]
    assert op_cost("aten::conv2d", shapes, [F32, F32, "None", INTS2, INTS2, INTS2, "Int"], [], []) is None


CONV_BACKWARD_SHAPES = [[2, 4, 8, 8], [2, 3, 8, 8], [4, 3, 3, 3], [[]], [[], []], [[], []], [[], []], []]
CONV_BACKWARD_SHAPES += [[[], []], [], [[], [], []]]
CONV_BACKWARD_TYPES = [F32, F32, F32, "GenericList[Int]", INTS2, INTS2, INTS2, "Bool", INTS2, "Int"]
CONV_BACKWARD_TYPES += ["GenericList[Bool,Bool,Bool]"]
CONV_FORWARD_FLOPS = 2 * 2 * 4 * 64 * 3 * 9


def conv_backward_values(mask: list[bool]) -> list[object]:
    return [None, None, None, [4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, mask]


@pytest.mark.parametrize(
    ("mask", "flops"),
    [
        ([True, True, False], 2 * CONV_FORWARD_FLOPS),  # grad input + grad weight
        ([False, True, False], CONV_FORWARD_FLOPS),  # first layer: no grad for the image
        ([True, True, True], 2 * CONV_FORWARD_FLOPS + 2 * 4 * 8 * 8),  # + bias grad: sum of grad_output
    ],
)
def test_convolution_backward_counts_the_grads_its_output_mask_requests(mask, flops):
    outputs = [[2, 3, 8, 8], [4, 3, 3, 3], [4] if mask[2] else []]
    out_types = [F32 if mask[0] else UNDEFINED, F32, F32 if mask[2] else UNDEFINED]
    cost = op_cost(
        "aten::convolution_backward",
        CONV_BACKWARD_SHAPES,
        CONV_BACKWARD_TYPES,
        outputs,
        out_types,
        conv_backward_values(mask),
    )
    assert cost is not None and cost.num_ops == flops


def test_convolution_backward_without_values_reads_the_grads_from_its_outputs():
    outputs = [[], [4, 3, 3, 3], []]
    cost = op_cost(
        "aten::convolution_backward", CONV_BACKWARD_SHAPES, CONV_BACKWARD_TYPES, outputs, [UNDEFINED, F32, UNDEFINED]
    )
    assert cost is not None and cost.num_ops == CONV_FORWARD_FLOPS


# ---------------------------------------------------------------------------------------------
# elementwise


def test_relu_counts_one_flop_per_element_and_reads_plus_writes():
    cost = op_cost("aten::relu", [[32, 64, 8, 8]], [F32], [[32, 64, 8, 8]], [F32])
    numel = 32 * 64 * 8 * 8
    assert cost == OpCost(numel, f32(numel, numel), "elementwise")


def test_in_place_and_out_of_place_forms_cost_the_same():
    shapes, types = [[1024]], [F32]
    assert op_cost("aten::relu_", shapes, types, shapes, types) == op_cost("aten::relu", shapes, types, shapes, types)


def test_gelu_uses_its_per_element_constant():
    cost = op_cost("aten::gelu", [[4096], []], [F32, "String"], [[4096]], [F32])
    assert cost is not None and cost.num_ops == GELU_FLOPS * 4096


def test_binary_op_without_listed_output_counts_the_broadcast_result():
    # [64, 1] + [1, 128]: the larger input stands in for the missing output
    cost = op_cost("aten::add", [[64, 128], [1, 128], []], [F32, F32, "Int"], [], [])
    assert cost is not None and cost.num_ops == 64 * 128


def test_foreach_ops_sum_over_the_list_and_write_their_first_list_in_place():
    lists = [[[1000], [24]], [[1000], [24]], []]
    list_type = "GenericList[Tensor(float),Tensor(float)]"
    cost = op_cost("aten::_foreach_add_", lists, [list_type, list_type, "Int"], [], [])
    # reads both lists, writes the first
    assert cost == OpCost(1024, f32(1024, 1024) + f32(1024), "elementwise")


def test_half_precision_halves_the_bytes_but_not_the_flops():
    f32_cost = op_cost("aten::mul", [[4096], [4096]], [F32, F32], [[4096]], [F32])
    f16_cost = op_cost("aten::mul", [[4096], [4096]], [F16, F16], [[4096]], [F16])
    assert f32_cost is not None and f16_cost is not None
    assert (f16_cost.num_ops, f16_cost.tensor_size) == (f32_cost.num_ops, f32_cost.tensor_size // 2)


def test_an_unknown_dtype_takes_its_itemsize_from_the_values():
    types = ["Tensor(c10::Float8_new)", "Tensor(c10::Float8_new)"]
    values = [[1, 2, 0, 64, 1, "cuda:0"], [3, 4, 0, 64, 1, "cuda:0"]]
    with_values = op_cost("aten::mul", [[64], [64]], types, [], [], values)
    assert with_values is not None and with_values.tensor_size == 2 * 64
    assert op_cost("aten::mul", [[64], [64]], types, [], []) is None


@pytest.mark.parametrize("name", ["aten::copy_", "aten::fill_", "aten::zero_", "aten::view", "aten::einsum"])
def test_copies_fills_views_and_einsum_have_no_model(name):
    assert name not in MODELED_OPS
    assert op_cost(name, [[64], [64]], [F32, F32], [[64]], [F32]) is None


# ---------------------------------------------------------------------------------------------
# reduction and normalization


def test_softmax_counts_five_flops_per_input_element():
    cost = op_cost("aten::_softmax", [[512, 1024], [], []], [F32, "Int", "Bool"], [[512, 1024]], [F32])
    assert cost == OpCost(SOFTMAX_FLOPS * 512 * 1024, f32(512 * 1024, 512 * 1024), "reduction")


def test_sum_counts_one_flop_per_input_element():
    cost = op_cost("aten::sum", [[32, 1000], [], [], []], [F32, "GenericList[]", "Bool", "None"], [[]], [F32])
    assert cost == OpCost(32 * 1000, f32(32 * 1000, 1), "reduction")


def test_cross_entropy_counts_per_logit():
    cost = op_cost("aten::cross_entropy_loss", [[32, 1000], [32], []], [F32, I64, "None"], [[]], [F32])
    assert cost is not None and cost.num_ops == CROSS_ENTROPY_FLOPS * 32 * 1000


def test_nll_loss_counts_one_flop_per_target_not_per_logit():
    shapes = [[512, 1024], [512], [], [], []]
    types = [F32, "Tensor(long int)", UNDEFINED, "Int", "Int"]
    cost = op_cost("aten::nll_loss_forward", shapes, types, [[], []], [F32, F32])
    assert cost == OpCost(512, f32(512 * 1024) + 8 * 512 + f32(1, 1), "reduction")


def test_layer_norm_counts_five_flops_per_element_and_backward_twice_that():
    x = [8, 128, 768]
    numel = 8 * 128 * 768
    forward = op_cost(
        "aten::native_layer_norm",
        [x, [[]], [768], [768], []],
        [F32, "GenericList[Int]", F32, F32, "Double"],
        [x, [8, 128, 1], [8, 128, 1]],
        [F32] * 3,
    )
    backward = op_cost(
        "aten::native_layer_norm_backward",
        [x, x, [[]], [8, 128, 1], [8, 128, 1], [768], [768], [[], [], []]],
        [F32, F32, "GenericList[Int]", F32, F32, F32, F32, "GenericList[Bool,Bool,Bool]"],
        [x, [768], [768]],
        [F32] * 3,
    )
    assert forward is not None and backward is not None
    assert (forward.family, forward.num_ops) == ("normalization", NORM_FLOPS * numel)
    assert backward.num_ops == NORM_FLOPS * NORM_BACKWARD_FACTOR * numel


def test_batch_norm_counts_the_activations_not_the_per_channel_statistics():
    x = [32, 64, 56, 56]
    shapes = [x, [64], [64], [64], [64], [], [], []]
    types = [F32, F32, F32, F32, F32, "Bool", "Double", "Double"]
    cost = op_cost(
        "aten::cudnn_batch_norm", shapes, types, [x, [64], [64], [0]], [F32, F32, F32, "Tensor(unsigned char)"]
    )
    assert cost is not None and cost.num_ops == NORM_FLOPS * 32 * 64 * 56 * 56


# ---------------------------------------------------------------------------------------------
# embedding


def test_embedding_reads_the_gathered_rows_not_the_whole_table():
    # table [50000, 64] float, indices [8, 16] int64 -> output [8, 16, 64]
    shapes = [[50000, 64], [8, 16], [], [], []]
    types = [F32, I64, "Int", "Bool", "Bool"]
    cost = op_cost("aten::embedding", shapes, types, [[8, 16, 64]], [F32])
    gathered = 8 * 16 * 64
    assert cost == OpCost(gathered, 8 * 8 * 16 + f32(gathered) + f32(gathered), "embedding")


def test_embedding_backward_counts_one_add_per_accumulated_element():
    shapes = [[8, 16, 64], [8, 16], [], [], []]
    types = [F32, I64, "Int", "Int", "Bool"]
    cost = op_cost("aten::embedding_dense_backward", shapes, types, [[50000, 64]], [F32])
    # grad and indices read, the dense table gradient written in full
    assert cost == OpCost(8 * 16 * 64, f32(8 * 16 * 64) + 8 * 8 * 16 + f32(50000 * 64), "embedding")


# ---------------------------------------------------------------------------------------------
# what has no model


def test_modeled_ops_are_full_aten_names():
    assert {"aten::mm", "aten::addmm", "aten::convolution", "aten::relu_", "aten::embedding"} <= MODELED_OPS
    assert all(name.startswith("aten::") for name in MODELED_OPS)


@pytest.mark.parametrize("name", ["aten::nonexistent", "mm", "nccl:all_reduce", "## forward ##", ""])
def test_unknown_names_have_no_model(name):
    assert op_cost(name, [[16, 64], [64, 32]], [F32, F32], [[16, 32]], [F32]) is None


@pytest.mark.parametrize(
    ("shapes", "types"),
    [
        ([[16, 64]], [F32, F32]),  # shapes shorter than types (truncated list)
        ([[16, 64], [64, 32]], [F32]),  # types shorter than shapes
        ("16x64", [F32, F32]),  # not a list
        ([[16, 64], None], [F32, F32]),  # a tensor without a shape
        ([[16, "s0"], [64, 32]], [F32, F32]),  # symbolic dimension
        ([[16, -1], [64, 32]], [F32, F32]),  # negative dimension
        ([[16, 64, 2], [64, 32]], [F32, F32]),  # wrong rank for mm
        ([[16, 64], [63, 32]], [F32, F32]),  # inner dimensions differ
        ([[16, 64], [64, 32]], [F32, ["not", "a", "type"]]),  # unhashable type entry
        ([[0, 64], [64, 32]], [F32, F32]),  # empty tensor: no work
    ],
)
def test_malformed_or_empty_arguments_have_no_model(shapes, types):
    assert op_cost("aten::mm", shapes, types, [[16, 32]], [F32]) is None


def test_a_tensor_list_shorter_than_its_type_has_no_model():
    list_type = "GenericList[Tensor(float),Tensor(float)]"
    assert op_cost("aten::_foreach_mul_", [[[1000]], []], [list_type, "Double"], [], []) is None


junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 5) | st.text(max_size=4) | st.sampled_from([F32, I64, "Int"]),
    lambda children: st.lists(children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(sorted(MODELED_OPS)),
    in_shapes=junk,
    in_types=junk,
    out_shapes=junk,
    out_types=junk,
    values=junk,
)
def test_op_cost_never_raises_on_arbitrary_arguments(name, in_shapes, in_types, out_shapes, out_types, values):
    cost = op_cost(name, in_shapes, in_types, out_shapes, out_types, values)
    assert cost is None or (cost.num_ops > 0 and cost.tensor_size > 0)


# ---------------------------------------------------------------------------------------------
# real traces

RESNET_TRACE = "param/resnet_1gpu_et.json.gz"
#: ResNet-50 forward at 224x224: 4.09 GMACs per image (torchvision's model card lists "4.09 GFLOPS",
#: which count multiply-adds; He et al. 2016, Table 1, round it to 3.8e9). Nearly all are convolutions.
RESNET50_MACS_PER_IMAGE = 4.09e9
RESNET_TOLERANCE = 0.10


def costs_by_name(relpath: str) -> tuple[dict[str, list[OpCost | None]], list[list[int]], int]:
    """Cost of every modeled op in a shared trace, by name; the first convolution's input shape per
    occurrence; and the number of ``## forward ##`` annotations (training steps)."""
    trace = load_host_trace(require_shared(relpath))
    costs: dict[str, list[OpCost | None]] = defaultdict(list)
    conv_inputs = []
    for node in trace.nodes:
        if node.name in MODELED_OPS:
            shapes = node.inputs.shapes()
            args = (shapes, node.inputs.types(), node.outputs.shapes(), node.outputs.types(), node.inputs.values())
            costs[node.name].append(op_cost(node.name, *args))
            if node.name == "aten::convolution":
                conv_inputs.append(shapes[0])
    steps = sum(node.name == "## forward ##" for node in trace.nodes)
    return costs, conv_inputs, steps


@pytest.fixture(scope="module")
def resnet_costs() -> tuple[dict[str, list[OpCost | None]], list[list[int]], int]:
    return costs_by_name(RESNET_TRACE)


def test_every_modeled_op_of_the_resnet_trace_gets_a_cost(resnet_costs):
    costs, _, _ = resnet_costs
    for name in ["aten::convolution", "aten::addmm", "aten::relu_", "aten::cudnn_batch_norm"]:
        assert costs[name], f"{name} does not occur in the trace"
    missing = {name: sum(c is None for c in found) for name, found in costs.items() if None in found}
    assert missing == {}


def test_resnet50_convolution_forward_flops_match_the_textbook_count(resnet_costs):
    costs, conv_inputs, steps = resnet_costs
    batch, _, height, width = conv_inputs[0]  # the stem convolution sees the images
    assert (batch, height, width, steps) == (32, 224, 224, 3)
    forward_flops = sum(c.num_ops for c in costs["aten::convolution"]) / steps
    expected = 2 * RESNET50_MACS_PER_IMAGE * batch
    assert forward_flops == pytest.approx(expected, rel=RESNET_TOLERANCE)


def test_resnet50_convolution_backward_is_almost_twice_the_forward(resnet_costs):
    # twice, less the grad of the input image that the stem convolution does not compute
    costs, _, _ = resnet_costs
    forward = sum(c.num_ops for c in costs["aten::convolution"])
    backward = sum(c.num_ops for c in costs["aten::convolution_backward"])
    assert 1.9 * forward < backward < 2 * forward


def test_every_gemm_of_the_flat_layout_linear_trace_gets_a_cost():
    costs, _, _ = costs_by_name("param/linear_et.json.gz")
    for name in ["aten::addmm", "aten::mm", "aten::linear", "aten::relu"]:
        assert costs[name] and all(c is not None and c.num_ops > 0 for c in costs[name])


# -- when the values matter ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "types", "reads"),
    [
        ("aten::mm", [F32, F32], False),
        ("aten::layer_norm", [F32, "GenericList[Int]", F32, F32, "Double", "Bool"], False),
        ("aten::_foreach_sqrt", ["GenericList[Tensor(float),Tensor(float)]"], False),
        ("aten::_foreach_sqrt", ["GenericList[Tensor(float),Tensor(odd)]"], True),  # an itemsize from the value
        ("aten::mm", ["Tensor(odd)", F32], True),
        ("aten::convolution", [F32, F32, F32], True),  # the transposed flag
        ("aten::relu", [UNDEFINED], False),
    ],
)
def test_the_values_matter_for_convolutions_and_tensors_of_unknown_dtype(name, types, reads):
    assert reads_values(name, types) is reads


@pytest.mark.parametrize("relpath", ["param/resnet_2gpu_et.json.gz", "param/linear_et.json.gz"])
def test_where_the_values_do_not_matter_the_cost_is_the_same_without_them(relpath):
    trace = load_host_trace(require_shared(relpath))
    checked = 0
    for node in trace.nodes:
        types = node.inputs.types()
        if node.name not in MODELED_OPS or reads_values(node.name, types):
            continue
        args = (node.name, node.inputs.shapes(), types, node.outputs.shapes(), node.outputs.types())
        assert op_cost(*args, node.inputs.values()) == op_cost(*args, None), node.id
        checked += 1
    assert checked > 0
