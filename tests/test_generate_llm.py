"""``chakra.generate.llm``: generated transformer workloads against the closed forms of
``reference/workload-generators.md`` §7, in the simulator, and across ranks."""

from __future__ import annotations

import dataclasses
import filecmp
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest
from helpers import run_cli

from chakra import io
from chakra.attrs import get_attr
from chakra.errors import ChakraInputError
from chakra.generate.layout import Layout, comm_groups
from chakra.generate.llm import generate_llm
from chakra.generate.schedules import schedule_units
from chakra.generate.specs import HARDWARE_PRESETS, PRESETS, ModelSpec, ParallelSpec, WorkloadSpec, check_spec
from chakra.generate.training import stage_params
from chakra.schema.protobuf.et_def_pb2 import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    REDUCE_SCATTER,
)
from chakra.sim.config import load_network, load_system
from chakra.sim.run import simulate_workload
from chakra.validate import astra_group_id_note, validate_set
from chakra.workload import open_workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"

#: A small GPT-like model: every formula exercised, files of a few hundred nodes.
TINY = ModelSpec(
    "tiny", layers=4, hidden=256, heads=8, kv_heads=8, ffn=1024, vocab=1000, seq_len=128,
    norm="layernorm", tied_embeddings=True, learned_positions=True, bias=True,
)  # fmt: skip
TINY_MOE = dataclasses.replace(TINY, name="tiny-moe", experts=4, top_k=2, gated_mlp=True, norm="rmsnorm", bias=False)
GEMMS = ("attn.qkv", "attn.out", "mlp.up", "mlp.down", "lm_head", "moe.router", "moe.expert_up", "moe.expert_down")


def spec_of(model: ModelSpec = TINY, *, global_batch: int | None = 8, **parallel: object) -> WorkloadSpec:
    return WorkloadSpec(model, ParallelSpec(**parallel), HARDWARE_PRESETS["h100"], global_batch=global_batch)  # type: ignore[arg-type]


def generate(tmp_path: Path, spec: WorkloadSpec, name: str = "w") -> dict[int, list]:
    """Generate and read every rank back: rank -> nodes."""
    result = generate_llm(spec, tmp_path / name)
    return {rank: io.read(path)[1] for rank, path in enumerate(result.files)}


def is_gemm(node) -> bool:
    return node.type == COMP_NODE and any(f".{g}." in f".{node.name}." for g in GEMMS)


def collectives(nodes: list, comm_type: int, fragment: str = "") -> list:
    return [
        n for n in nodes
        if n.type == COMM_COLL_NODE and get_attr(n, "comm_type") == comm_type and fragment in n.name
    ]  # fmt: skip


def kappa(s: int) -> float:
    return (s + 1) / (2 * s)


# ---- compute ------------------------------------------------------------------------------------
def test_gemm_flops_over_all_ranks_are_six_times_matmul_params_times_tokens(tmp_path: Path):
    spec = spec_of(tp=2, pp=2, dp=2)
    ranks = generate(tmp_path, spec)
    total = sum(get_attr(n, "num_ops") for nodes in ranks.values() for n in nodes if is_gemm(n))
    tokens = spec.global_batch * TINY.seq_len
    assert total == 6 * TINY.matmul_params(tp=2) * tokens


def test_full_recomputation_adds_one_forward(tmp_path: Path):
    spec = dataclasses.replace(spec_of(tp=2, pp=2), recompute="full")
    ranks = generate(tmp_path, spec)
    total = sum(get_attr(n, "num_ops") for nodes in ranks.values() for n in nodes if is_gemm(n))
    layer_mm = TINY.layers * TINY.layer_matmul_params()
    assert total == (6 * TINY.matmul_params(tp=2) + 2 * layer_mm) * spec.global_batch * TINY.seq_len


def test_attention_flops_follow_the_flash_convention_with_causal_masking(tmp_path: Path):
    spec = spec_of(tp=2, pp=2, dp=2)
    ranks = generate(tmp_path, spec)
    total = sum(get_attr(n, "num_ops") for nodes in ranks.values() for n in nodes if "attn.core" in n.name)
    s = TINY.seq_len
    expected = 14 * TINY.layers * TINY.q_dim * s * kappa(s) * spec.global_batch * s
    assert total == pytest.approx(expected, rel=1e-6)


def test_every_gemm_has_a_dgrad_and_a_wgrad_of_the_forward_size(tmp_path: Path):
    nodes = generate(tmp_path, spec_of(tp=2, global_batch=1))[0]
    by_name = {n.name: get_attr(n, "num_ops") for n in nodes if is_gemm(n)}
    forwards = [name for name in by_name if ".fwd" in name]
    assert len(forwards) == 4 * TINY.layers + 1  # qkv, out, up, down per layer; the LM head
    for name in forwards:
        back = name.replace(".fwd", ".bwd")
        assert by_name[f"{back}.dgrad"] == by_name[f"{back}.wgrad"] == by_name[name]


def test_total_flops_per_token_are_near_6n_plus_attention_not_the_mac_count(tmp_path: Path):
    spec = spec_of(tp=2, pp=2)
    ranks = generate(tmp_path, spec)
    tokens = spec.global_batch * TINY.seq_len
    per_token = sum(get_attr(n, "num_ops") for nodes in ranks.values() for n in nodes if n.type == COMP_NODE) / tokens
    s = TINY.seq_len
    closed_form = 6 * TINY.matmul_params(tp=2) + 14 * TINY.layers * TINY.q_dim * s * kappa(s)
    assert 1.0 <= per_token / closed_form < 1.05  # elementwise ops and the optimizer add a little


def test_compute_nodes_carry_flops_bytes_and_a_roofline_duration(tmp_path: Path):
    spec = spec_of(tp=2, global_batch=1)
    nodes = generate(tmp_path, spec)[0]
    hw = HARDWARE_PRESETS["h100"]
    for node in (n for n in nodes if n.type == COMP_NODE):
        flops, size = get_attr(node, "num_ops"), get_attr(node, "tensor_size")
        assert flops >= 1 and size >= 1
        assert node.duration_micros == max(round(max(flops / hw.peak_flops, size / hw.mem_bw_bytes_per_s) * 1e6), 1)
    qkv = next(n for n in nodes if n.name == "layer0.fwd.attn.qkv")
    m, k, n = TINY.seq_len, TINY.hidden, 3 * TINY.hidden // 2  # T, h, (q + 2kv)/t
    assert get_attr(qkv, "num_ops") == 2 * m * k * n
    assert get_attr(qkv, "tensor_size") == 2 * (m * k + k * n + m * n)  # bf16 inputs, weights and outputs


# ---- communication -------------------------------------------------------------------------------
def test_tensor_parallel_all_reduces_per_layer_and_micro_batch(tmp_path: Path):
    spec = spec_of(tp=2, pp=2, global_batch=4)  # m = 4, 2 layers per stage
    ranks = generate(tmp_path, spec)
    m, layers_per_stage = 4, 2
    act = TINY.seq_len * TINY.hidden * 2
    first, last = ranks[0], ranks[2]
    layer_ars = [n for n in collectives(first, ALL_REDUCE) if n.name.startswith("layer")]
    assert len(layer_ars) == 4 * layers_per_stage * m
    assert {get_attr(n, "comm_size") for n in layer_ars} == {act}
    assert len(collectives(first, ALL_REDUCE, "embedding.fwd")) == m
    assert len(collectives(last, ALL_REDUCE, "lm_head.bwd")) == m
    ce = collectives(last, ALL_REDUCE, "cross_entropy")
    assert len(ce) == 3 * m and {get_attr(n, "comm_size") for n in ce} == {4 * TINY.seq_len}


def test_sequence_parallelism_swaps_all_reduces_for_gathers_and_scatters(tmp_path: Path):
    spec = spec_of(tp=2, pp=3, sp=True, global_batch=2, layers_per_stage=(1, 2, 1))
    nodes = generate(tmp_path, spec)[2]  # the middle stage: 2 layers, nothing else
    m, layers, act = 2, 2, TINY.seq_len * TINY.hidden * 2
    gathers, scatters = collectives(nodes, ALL_GATHER), collectives(nodes, REDUCE_SCATTER)
    assert len(gathers) == 6 * layers * m and len(scatters) == 4 * layers * m  # Megatron's re-gather included
    assert {get_attr(n, "comm_size") for n in gathers} == {act // 2}
    assert {get_attr(n, "comm_size") for n in scatters} == {act}
    assert [n.name for n in collectives(nodes, ALL_REDUCE)] == ["norms.sp_allreduce"]


def tiny_params_per_rank(stage: int, t: int = 2) -> int:
    """Parameters one rank of a 2-stage TINY pipeline holds, written out from the model (§1.4, §2.1-2.3)."""
    h, f = TINY.hidden, TINY.ffn
    vocab = TINY.padded_vocab(t) // t
    layer = 4 * h * h // t + 3 * h // t + h  # QKV and output weights split; QKV bias split, output bias whole
    layer += 2 * h * f // t + f // t + h  # MLP up (and its bias) split, down split, down bias whole
    layer += 2 * 2 * h  # two LayerNorms, scale and bias, replicated
    edge = vocab * h + TINY.seq_len * h if stage == 0 else 2 * h + vocab * h  # table + positions | norm + head copy
    return 2 * layer + edge


def test_data_parallel_gradient_bytes_equal_the_parameters_the_rank_holds(tmp_path: Path):
    spec = spec_of(tp=2, pp=2, dp=2)
    ranks = generate(tmp_path, spec)
    for rank, stage in ((0, 0), (4, 1)):
        buckets = [n for n in collectives(ranks[rank], ALL_REDUCE) if n.name.startswith("grad_bucket")]
        assert sum(get_attr(n, "comm_size") for n in buckets) == tiny_params_per_rank(stage) * 4  # fp32
        assert sum(stage_params(spec, stage)) == tiny_params_per_rank(stage)


def test_data_parallel_volume_does_not_change_with_the_micro_batch_count(tmp_path: Path):
    def volume(global_batch: int) -> tuple[int, int]:
        nodes = generate(tmp_path / str(global_batch), spec_of(pp=2, dp=2, global_batch=global_batch))[0]
        buckets = [n for n in collectives(nodes, ALL_REDUCE) if n.name.startswith("grad_bucket")]
        return len(buckets), sum(get_attr(n, "comm_size") for n in buckets)

    for folder in ("4", "16"):
        (tmp_path / folder).mkdir()
    assert volume(4) == volume(16)


def test_gpt3_anchors_of_the_reference(tmp_path: Path):
    gpt3 = PRESETS["gpt3-175b"]
    spec = dataclasses.replace(spec_of(gpt3, tp=8, pp=8, dp=2, global_batch=16), flash_attention=False, causal=False)
    result = generate_llm(spec, tmp_path / "gpt3")
    _, interior = io.read(result.files[8 * 2 * 3])  # a rank of stage 3
    assert len(collectives(interior, ALL_REDUCE, "tp_reduce")) == 384
    assert {get_attr(n, "comm_size") for n in collectives(interior, ALL_REDUCE, "tp_reduce")} == {50_331_648}
    assert {get_attr(n, "comm_size") for n in interior if n.type == COMM_SEND_NODE} == {50_331_648}
    layer36 = [n for n in interior if n.type == COMP_NODE and n.name.startswith("layer36.fwd.")]
    layer_fwd = sum(get_attr(n, "num_ops") for n in layer36)
    assert layer_fwd == pytest.approx(9.535e11 * 8, rel=2e-3)  # 8 micro-batches of one layer
    step = sum(get_attr(n, "num_ops") for n in interior if is_gemm(n) or "attn.core" in n.name)
    assert step == pytest.approx(2.746e14, rel=1e-3)
    weights_and_norms = 2_717_908_992 + 12 * 4 * gpt3.hidden  # the anchor counts weights only
    no_bias = dataclasses.replace(spec, model=dataclasses.replace(gpt3, bias=False))
    assert sum(stage_params(no_bias, 3)) == weights_and_norms


@pytest.mark.parametrize(("rank", "edge_unit"), [(0, "embedding"), (4, "lm_head")])
def test_zero3_gathers_twice_and_scatters_once_per_unit_and_micro_batch(tmp_path: Path, rank: int, edge_unit: str):
    spec = spec_of(pp=2, dp=4, zero=3, global_batch=8)  # m = 2; 2 layers per stage plus the embedding or head
    nodes = generate(tmp_path, spec)[rank]
    units, m = 3, 2
    gathers = [n for n in collectives(nodes, ALL_GATHER) if "zero3" in n.name]
    scatters = [n for n in collectives(nodes, REDUCE_SCATTER) if "zero3" in n.name]
    assert len(gathers) == 2 * units * m and len(scatters) == units * m
    assert len([n for n in scatters if n.name.startswith(edge_unit)]) == m
    held = sum(stage_params(spec, rank // 4))
    assert sum(get_attr(n, "comm_size") for n in scatters) == m * held * 4  # every unit's gradients, fp32


def test_zero2_reduce_scatters_every_micro_batch_and_gathers_the_parameters_once(tmp_path: Path):
    spec = spec_of(pp=2, dp=2, zero=2, global_batch=8)  # m = 4
    nodes = generate(tmp_path, spec)[2]
    scatters = [n for n in collectives(nodes, REDUCE_SCATTER) if n.name.startswith("grad_bucket")]
    gathers = [n for n in collectives(nodes, ALL_GATHER) if n.name.startswith("param_bucket")]
    held = tiny_params_per_rank(1, t=1)
    assert sum(get_attr(n, "comm_size") for n in scatters) == 4 * held * 4
    assert len(scatters) == 4 * len(gathers)
    assert sum(get_attr(n, "comm_size") for n in gathers) * 2 == pytest.approx(held * 2, abs=2 * 2 * len(gathers))


def test_zero1_reduce_scatters_then_gathers_the_updated_parameters(tmp_path: Path):
    spec = spec_of(pp=2, dp=4, zero=1)
    nodes = generate(tmp_path, spec)[4]
    scatters = [n for n in collectives(nodes, REDUCE_SCATTER) if n.name.startswith("grad_bucket")]
    gathers = [n for n in collectives(nodes, ALL_GATHER) if n.name.startswith("param_bucket")]
    assert scatters and len(gathers) == len(scatters)
    assert sum(get_attr(n, "comm_size") for n in scatters) == sum(stage_params(spec, 1)) * 4
    optimizer = next(n for n in nodes if n.name == "optimizer.step")
    assert all(optimizer.id < g.id for g in gathers)


def test_pipeline_sends_and_receives_pair_up_exactly(tmp_path: Path):
    spec = spec_of(tp=2, pp=4, dp=2, global_batch=8)  # m = 4
    ranks = generate(tmp_path, spec)

    def key(rank: int, node) -> tuple[int, int, int, int]:
        src = rank if node.type == COMM_SEND_NODE else get_attr(node, "comm_src")
        dst = get_attr(node, "comm_dst") if node.type == COMM_SEND_NODE else rank
        return src, dst, get_attr(node, "comm_tag"), get_attr(node, "comm_size")

    sends = Counter(key(r, n) for r, nodes in ranks.items() for n in nodes if n.type == COMM_SEND_NODE)
    recvs = Counter(key(r, n) for r, nodes in ranks.items() for n in nodes if n.type == COMM_RECV_NODE)
    assert sends == recvs
    assert sum(sends.values()) == 2 * 4 * (4 - 1) * 2 * 2
    assert all(0 <= tag < 500_000_000 for _, _, tag, _ in sends)


def test_experts_exchange_tokens_with_four_all_to_alls_per_moe_layer(tmp_path: Path):
    spec = spec_of(TINY_MOE, dp=4, ep=2, global_batch=8)  # m = 2, 4 layers
    ranks = generate(tmp_path, spec)
    for nodes in ranks.values():
        a2a = collectives(nodes, ALL_TO_ALL)
        assert len(a2a) == 4 * 4 * 2
        assert {get_attr(n, "comm_size") for n in a2a} == {2 * TINY.seq_len * TINY.hidden * 2}


def test_expert_gradients_reduce_over_the_expert_data_parallel_group(tmp_path: Path):
    spec = spec_of(TINY_MOE, dp=4, ep=2, global_batch=8)
    result = generate_llm(spec, tmp_path / "moe")
    groups = json.loads(result.groups_file.read_text()) if result.groups_file else {}
    _, nodes = io.read(result.files[0])
    expert = [n for n in nodes if n.name.startswith("grad_bucket") and n.name.endswith(".edp")]
    dense = [n for n in nodes if n.name.startswith("grad_bucket") and n.name.endswith(".dpcp")]
    assert sorted(groups[get_attr(expert[0], "pg_name")]) == [0, 2]  # rank 0's expert-data-parallel peers
    assert sorted(groups[get_attr(dense[0], "pg_name")]) == [0, 1, 2, 3]
    _, expert_params = stage_params(spec, 0)
    assert sum(get_attr(n, "comm_size") for n in expert) == expert_params * 4


# ---- groups, structure, schedules ----------------------------------------------------------------
def test_groups_follow_the_reference_worked_example():
    groups, ids = comm_groups(Layout(tp=2, dp=2, pp=2), ("tp", "dpcp", "emb"))
    assert groups == {
        1: [0, 1], 2: [2, 3], 3: [4, 5], 4: [6, 7], 5: [0, 2], 6: [1, 3], 7: [4, 6], 8: [5, 7],
        9: [0, 4], 10: [1, 5], 11: [2, 6], 12: [3, 7],
    }  # fmt: skip
    assert (ids["tp"][5], ids["dpcp"][5], ids["emb"][5]) == (3, 8, 10)


def test_size_one_dimensions_get_no_groups_and_no_collectives(tmp_path: Path):
    spec = spec_of(pp=2, global_batch=2)  # tp = dp = cp = 1
    result = generate_llm(spec, tmp_path / "w")
    _, nodes = io.read(result.files[0])
    assert [n.name for n in nodes if n.type == COMM_COLL_NODE] == ["embedding.tied_allreduce"]
    assert result.groups_file is not None
    assert json.loads(result.groups_file.read_text()) == {"1": [0, 1]}


def test_every_file_validates_clean_for_astra_sim(tmp_path: Path):
    spec = spec_of(TINY_MOE, tp=2, pp=2, dp=2, ep=2, sp=True, zero=1)
    result = generate_llm(spec, tmp_path / "w")
    findings = validate_set(open_workload(tmp_path / "w", whole=True), target="astra-sim")
    assert [f for f in findings if f.severity != "note"] == []
    assert result.world_size == 8


def test_ranks_of_one_stage_differ_only_in_communicators_and_peers(tmp_path: Path):
    ranks = generate(tmp_path, spec_of(tp=2, pp=2, dp=2))
    stage_ranks = [0, 1, 2, 3]
    shapes = {tuple((n.name, n.type, tuple(n.data_deps), tuple(n.ctrl_deps)) for n in ranks[r]) for r in stage_ranks}
    assert len(shapes) == 1
    assert all(n.id == i for i, n in enumerate(ranks[5]))  # ids per file from 0


def test_two_runs_write_byte_identical_files(tmp_path: Path):
    spec = spec_of(tp=2, pp=2, dp=2)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first, second = generate_llm(spec, tmp_path / "a" / "w"), generate_llm(spec, tmp_path / "b" / "w")
    assert all(filecmp.cmp(x, y, shallow=False) for x, y in zip(first.files, second.files, strict=True))


@pytest.mark.parametrize(("stage", "warmup"), [(0, 3), (1, 2), (2, 1), (3, 0)])
def test_1f1b_runs_p_minus_i_forwards_before_the_first_backward(stage: int, warmup: int):
    spec = spec_of(pp=4, global_batch=8)
    units = schedule_units(spec, stage)
    assert [u for u, _, _ in units[: warmup + 2]] == ["F"] * (warmup + 1) + ["B"]
    assert sorted(units) == sorted([("F", j, 0) for j in range(8)] + [("B", j, 0) for j in range(8)])


def test_compute_nodes_follow_the_schedule_in_one_ctrl_chain(tmp_path: Path):
    nodes = generate(tmp_path, spec_of(pp=4, global_batch=8))[1]  # stage 1
    compute = [n for n in nodes if n.type == COMP_NODE]
    assert all(list(b.ctrl_deps) == [a.id] for a, b in itertools.pairwise(compute))
    first_backward = next(i for i, n in enumerate(compute) if ".bwd." in n.name)
    assert len([n for n in compute[:first_backward] if n.name == "layer1.fwd.ln1"]) == 3  # min(p - i, m)


def test_a_pipeline_with_free_communication_takes_the_1f1b_closed_form(tmp_path: Path, fast_network):
    spec = spec_of(PRESETS["llama3-8b"], pp=4, global_batch=8)  # m = 8, 8 layers per stage
    spec = dataclasses.replace(spec, model=dataclasses.replace(spec.model, layers=16, vocab=128, tied_embeddings=False))
    result = generate_llm(spec, tmp_path / "w")
    _, nodes = io.read(result.files[1])  # an interior stage: no embedding or head
    t_f = sum(n.duration_micros for n in nodes if n.type == COMP_NODE and ".fwd." in n.name) / 8
    t_b = sum(n.duration_micros for n in nodes if n.type == COMP_NODE and ".bwd." in n.name) / 8
    sim = simulate_workload(tmp_path / "w", load_system(EXAMPLES / "system.json"), fast_network(4))
    expected_us = (8 + 4 - 1) * (t_f + t_b)
    assert sim.finish_ns / 1000 == pytest.approx(expected_us, rel=0.05)


# ---- the simulator runs every kind of workload to the end ----------------------------------------
WORKLOADS = {
    "1f1b": dict(tp=2, pp=2, dp=2),
    "gpipe": dict(tp=2, pp=2, dp=2, schedule="gpipe"),
    "sequence-parallel": dict(tp=2, pp=2, sp=True),
    "context-parallel": dict(tp=2, cp=2, pp=2),
    "zero1": dict(pp=2, dp=4, zero=1),
    "zero2": dict(pp=2, dp=4, zero=2),
    "zero3": dict(pp=2, dp=4, zero=3),
    "interleaved": dict(tp=2, pp=2, dp=2, schedule="interleaved", virtual_stages=2),
    "zero3-interleaved": dict(pp=2, dp=2, zero=3, schedule="interleaved", virtual_stages=2),
}


@pytest.fixture
def fast_network(tmp_path: Path):
    def make(npus: int):
        path = tmp_path / f"switch{npus}.yml"
        # a fast switch: communication nearly free next to these compute times
        path.write_text(f"topology: [ Switch ]\nnpus_count: [ {npus} ]\nbandwidth: [ 1.0e6 ]\nlatency: [ 1.0 ]\n")
        return load_network(path)

    return make


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_generated_training_workloads_validate_and_finish_in_the_simulator(tmp_path: Path, fast_network, name: str):
    spec = spec_of(**WORKLOADS[name])  # type: ignore[arg-type]
    result = generate_llm(spec, tmp_path / "w")
    findings = validate_set(open_workload(tmp_path / "w", whole=True), target="astra-sim")
    assert [f for f in findings if f.severity != "note"] == []
    sim = simulate_workload(tmp_path / "w", load_system(EXAMPLES / "system.json"), fast_network(result.world_size))
    assert len(sim.ranks) == result.world_size and sim.finish_ns > 0


def test_a_mixture_of_experts_workload_finishes_in_the_simulator(tmp_path: Path, fast_network):
    result = generate_llm(spec_of(TINY_MOE, tp=2, dp=4, ep=2, pp=2, global_batch=8), tmp_path / "w")
    sim = simulate_workload(tmp_path / "w", load_system(EXAMPLES / "system.json"), fast_network(result.world_size))
    assert len(sim.ranks) == 16


# ---- inference -----------------------------------------------------------------------------------
def inference_spec(**parallel: object) -> WorkloadSpec:
    spec = spec_of(PRESETS["llama3-70b"], global_batch=None, **parallel)
    return dataclasses.replace(spec, step="inference", micro_batch=8, prompt_len=1024, decode_steps=3)


def test_decode_reads_a_kv_cache_that_grows_by_one_token_per_step(tmp_path: Path):
    nodes = generate(tmp_path, inference_spec(tp=8))[0]
    attention = [n for n in nodes if n.name.startswith("layer0.") and n.name.endswith("attn.core")]
    assert [n.name.split(".")[1] for n in attention] == ["prefill", "decode1", "decode2", "decode3"]
    sizes = [get_attr(n, "tensor_size") for n in attention[1:]]
    kv_per_token = 8 * 2 * 128 * 2  # b sequences x (K and V) x one KV head of 128 x bf16 on each of 8 TP ranks
    assert sizes[1] - sizes[0] == sizes[2] - sizes[1] == kv_per_token
    flops = [get_attr(n, "num_ops") for n in attention[1:]]
    assert flops[1] - flops[0] == flops[2] - flops[1] > 0


def test_prefill_attention_grows_with_the_square_of_the_prompt(tmp_path: Path):
    def prefill_flops(prompt: int) -> int:
        spec = dataclasses.replace(inference_spec(tp=8), prompt_len=prompt, decode_steps=0)
        (tmp_path / str(prompt)).mkdir()
        nodes = generate(tmp_path / str(prompt), spec)[0]
        return get_attr(next(n for n in nodes if n.name == "layer0.prefill.attn.core"), "num_ops")

    assert prefill_flops(2048) / prefill_flops(1024) == pytest.approx(4, rel=1e-3)


def test_a_decode_gemm_is_memory_bound_with_intensity_near_the_batch(tmp_path: Path):
    nodes = generate(tmp_path, inference_spec(tp=8))[0]
    up = next(n for n in nodes if n.name == "layer0.decode1.mlp.up")
    assert get_attr(up, "num_ops") / get_attr(up, "tensor_size") == pytest.approx(8, rel=0.05)


def test_pipelined_inference_sends_tokens_back_and_finishes_in_the_simulator(tmp_path: Path, fast_network):
    spec = inference_spec(tp=2, pp=2)
    spec = dataclasses.replace(spec, model=dataclasses.replace(TINY, tied_embeddings=False))
    result = generate_llm(spec, tmp_path / "w")
    _, first = io.read(result.files[0])
    token_recvs = [n.name for n in first if n.type == COMM_RECV_NODE]
    assert token_recvs == ["decode1.token.recv", "decode2.token.recv", "decode3.token.recv"]
    assert not [n for n in first if n.type == COMM_COLL_NODE and n.name.startswith("grad")]
    findings = validate_set(open_workload(tmp_path / "w", whole=True), target="astra-sim")
    assert [f for f in findings if f.severity != "note"] == []
    sim = simulate_workload(tmp_path / "w", load_system(EXAMPLES / "system.json"), fast_network(4))
    assert len(sim.ranks) == 4


# ---- presets and the command line ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("preset", "params"),
    [
        ("llama3-8b", 8_030_261_248),
        ("llama3-70b", 70_553_706_496),
        ("llama3-405b", 405_853_388_800),
        ("mixtral-8x7b", 46_702_792_704),
    ],
)
def test_presets_have_the_published_parameter_counts(preset: str, params: int):
    assert PRESETS[preset].total_params() == params


def test_gpt3_preset_has_about_174_6_billion_parameters():
    assert PRESETS["gpt3-175b"].total_params() == pytest.approx(174.6e9, rel=1e-3)


def test_a_parallelism_that_does_not_divide_the_model_is_refused():
    with pytest.raises(ChakraInputError, match="tp must divide"):
        check_spec(spec_of(tp=3))


def test_the_cli_writes_a_workload_and_its_groups(tmp_path: Path):
    result = run_cli(
        "generate", "llm", "--preset", "llama3-8b", "--tp", "2", "--pp", "2", "--global-batch", "2",
        "--seq-len", "1024", "-o", str(tmp_path / "llama"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "wrote 4 ranks" in result.stdout
    assert (tmp_path / "llama.3.et").exists() and (tmp_path / "llama.comm_groups.json").exists()


def test_a_smaller_rerun_removes_the_ranks_of_the_larger_one(tmp_path: Path):
    generate_llm(spec_of(pp=2, dp=2), tmp_path / "w")
    result = generate_llm(spec_of(pp=2), tmp_path / "w")
    assert sorted(p.name for p in result.removed_stale) == ["w.2.et", "w.3.et"]
    assert sorted(p.name for p in tmp_path.glob("w.*.et")) == ["w.0.et", "w.1.et"]


def test_moe_gemm_flops_are_six_times_the_active_matmul_params_times_tokens(tmp_path: Path):
    spec = spec_of(TINY_MOE, dp=4, ep=2, global_batch=8)
    ranks = generate(tmp_path, spec)
    total = sum(get_attr(n, "num_ops") for nodes in ranks.values() for n in nodes if is_gemm(n))
    assert total == 6 * TINY_MOE.matmul_params() * spec.global_batch * TINY_MOE.seq_len  # top-k experts + router


def test_a_decode_step_reads_the_weights_of_every_local_expert_it_routes_to(tmp_path: Path):
    spec = dataclasses.replace(
        spec_of(TINY_MOE, dp=2, ep=2, global_batch=None), step="inference", micro_batch=1, prompt_len=64, decode_steps=1
    )
    nodes = generate(tmp_path, spec)[0]
    up = next(n for n in nodes if n.name == "layer0.decode1.moe.expert_up")
    h, f = TINY_MOE.hidden, TINY_MOE.ffn
    local = min(TINY_MOE.experts // 2, TINY_MOE.top_k)  # 2 token-expert pairs arrive, 2 experts hosted
    assert get_attr(up, "tensor_size") == 2 * (2 * h + local * h * 2 * f + 2 * 2 * f)


def test_the_interleaved_schedule_follows_the_reference_example():
    spec = dataclasses.replace(
        spec_of(pp=2, global_batch=4), parallel=ParallelSpec(pp=2, schedule="interleaved", virtual_stages=2)
    )

    def spelled(stage: int) -> str:
        return " ".join(f"{u}{j}c{c}" for u, j, c in schedule_units(spec, stage))

    assert spelled(0) == "F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 B2c1 B3c1 B2c0 B3c0"
    assert spelled(1) == "F0c0 F1c0 F0c1 B0c1 F1c1 B1c1 F2c0 B0c0 F3c0 B1c0 F2c1 B2c1 F3c1 B3c1 B2c0 B3c0"


def test_an_interleaved_pipeline_with_free_communication_takes_its_closed_form(tmp_path: Path, fast_network):
    model = dataclasses.replace(PRESETS["llama3-8b"], layers=16, vocab=128, tied_embeddings=False)
    spec = WorkloadSpec(
        model, ParallelSpec(pp=4, schedule="interleaved", virtual_stages=2), HARDWARE_PRESETS["h100"], global_batch=8
    )
    result = generate_llm(spec, tmp_path / "w")
    _, nodes = io.read(result.files[1])  # no embedding or head on stage 1
    t_f = sum(n.duration_micros for n in nodes if n.type == COMP_NODE and ".fwd." in n.name) / 8
    t_b = sum(n.duration_micros for n in nodes if n.type == COMP_NODE and ".bwd." in n.name) / 8
    sim = simulate_workload(tmp_path / "w", load_system(EXAMPLES / "system.json"), fast_network(4))
    expected_us = 8 * (t_f + t_b) + (4 - 1) * (t_f + t_b) / 2  # reference §3.2
    assert sim.finish_ns / 1000 == pytest.approx(expected_us, rel=0.05)


def test_interleaving_sends_v_times_the_messages_and_they_pair_up(tmp_path: Path):
    spec = spec_of(pp=2, dp=2, global_batch=8, schedule="interleaved", virtual_stages=2)  # m = 4
    ranks = generate(tmp_path, spec)
    sends = Counter(
        (r, get_attr(n, "comm_dst"), get_attr(n, "comm_tag")) for r, nodes in ranks.items() for n in nodes
        if n.type == COMM_SEND_NODE
    )  # fmt: skip
    recvs = Counter(
        (get_attr(n, "comm_src"), r, get_attr(n, "comm_tag")) for r, nodes in ranks.items() for n in nodes
        if n.type == COMM_RECV_NODE
    )  # fmt: skip
    assert sends == recvs
    # per rank and micro-batch: v - [i = p-1] forward sends plus v - [i = 0] backward sends (§2.6),
    # 3 on either stage here; 4 ranks, 4 micro-batches
    assert sum(sends.values()) == 4 * 4 * 3


@pytest.mark.parametrize(
    ("parallel", "message"),
    [
        (dict(tp=4, pp=1), "KV heads"),
        (dict(pp=6), "do not fill"),
        (dict(pp=2, schedule="interleaved", virtual_stages=2), "multiple of pp"),
        (dict(pp=2, virtual_stages=2), "needs schedule interleaved"),
    ],
)
def test_specs_that_would_generate_a_wrong_workload_are_refused(parallel: dict, message: str):
    model = dataclasses.replace(TINY, kv_heads=3, heads=12, hidden=384)
    with pytest.raises(ChakraInputError, match=message):
        check_spec(spec_of(model, global_batch=1, **parallel))  # type: ignore[arg-type]


def test_group_ids_beyond_astra_sims_tag_range_are_noted():
    groups, _ = comm_groups(Layout(tp=2, dp=34, pp=64), ("tp", "dpcp", "emb"))  # 4,352 ranks
    assert max(groups) > 2147
    assert "overflow" in (astra_group_id_note(max(groups)) or "")
    assert astra_group_id_note(2147) is None


def test_missing_output_folders_are_created(tmp_path: Path):
    result = generate_llm(spec_of(pp=2), tmp_path / "new" / "folder" / "w")
    assert all(path.exists() for path in result.files)


def test_the_presets_are_listed_without_an_output():
    result = run_cli("generate", "llm", "--list-presets")
    assert result.returncode == 0, result.stderr
    assert all(name in result.stdout for name in PRESETS)
