"""``chakra synth`` (issue 19): a model fitted on real workloads, samples drawn from it at the
fitted scale and at others, and the fidelity report comparing them."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import numpy as np
import pytest
from helpers import run_cli

from chakra.generate.llm import generate_llm
from chakra.generate.spec_input import spec_from_mapping
from chakra.share.leakage import StringSet, find_leaks
from chakra.synth.fidelity import (
    BYTES_BOUND,
    CRITICAL_PATH_BOUND,
    KS_BOUND,
    KS_MIN_SAMPLES,
    SHARE_BOUND,
    SIM_BOUND,
    FidelityReport,
    compare_workloads,
)
from chakra.synth.fit import fit_workload, model_leaks
from chakra.synth.model import MODEL_VERSION, load_model, save_model
from chakra.synth.motifs import Literal, Repeat, tandem_grammar
from chakra.synth.sample import LayerScale, sample_workload
from chakra.table import load_table
from chakra.workload import open_workload

SYSTEM = Path(__file__).resolve().parents[1] / "examples" / "astra" / "system.json"
#: A Llama 3 8B step on 8 ranks (TP 2 x PP 2 x DP 2), and the same model with twice the layers.
LLM_SPEC = {"model": {"preset": "llama3-8b"}, "parallel": {"tp": 2, "pp": 2, "dp": 2}, "hardware": "h100",
            "global_batch": 8}  # fmt: skip
LLAMA_LAYERS = 32


def _switch(folder: Path, npus: int) -> Path:
    path = folder / f"switch{npus}.yml"
    path.write_text(f"topology: [ Switch ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    return path


def _llm(folder: Path, layers: int = LLAMA_LAYERS) -> Path:
    spec = spec_from_mapping({**LLM_SPEC, "model": {"preset": "llama3-8b", "layers": layers}})
    prefix = folder / "llama"
    generate_llm(spec, prefix)
    return prefix


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _llm(tmp_path_factory.mktemp("synth_llm"))


def _fit_and_sample(source: Path, out: Path, **scale: object) -> Path:
    model, _ = fit_workload([source])
    path = out.parent / f"{out.name}.synth.json"
    save_model(model, path)
    sample_workload(load_model(path), out, **scale)  # type: ignore[arg-type]
    return out


def _assert_within_bounds(report: FidelityReport) -> None:
    assert report.ok, [(r.group, r.name, r.source, r.sample, r.difference) for r in report.failed()]
    bounds = {
        "share of span": SHARE_BOUND, "bytes per rank": BYTES_BOUND, "duration KS": KS_BOUND,
        "busy ns per rank": BYTES_BOUND,
    }  # fmt: skip
    for row in report.rows:
        if row.group in bounds:
            assert row.bound == bounds[row.group]
    assert report.row("time", "simulated step (ns)").bound == SIM_BOUND
    assert report.row("time", "critical path (ns)").bound == CRITICAL_PATH_BOUND
    ks_rows = [r for r in report.rows if r.group == "duration KS"]
    assert ks_rows and all(min(r.source, r.sample) >= KS_MIN_SAMPLES for r in ks_rows)


def test_a_sample_of_a_live_gloo_job_matches_its_structure_and_judges_its_times(gloo_job: Path, tmp_path: Path) -> None:
    sample = _fit_and_sample(gloo_job, tmp_path / "synthetic", seed=7)
    report = compare_workloads(gloo_job, sample, system=SYSTEM, network=_switch(tmp_path, 2))
    # a small live job's step is a few hundred nodes whose recorded times vary with what the machine
    # did while recording (a CI run beside other work put one sample's simulated step 6.6 % off);
    # the time bounds are held on the deterministic LLM step below; here both sides must simulate
    assert [row.name for row in report.failed() if row.group != "time"] == []
    for name, bound in (("simulated step (ns)", SIM_BOUND), ("critical path (ns)", CRITICAL_PATH_BOUND)):
        row = report.row("time", name)
        assert row.bound == bound and row.source > 0 and row.sample > 0


def test_a_sample_of_a_generated_llm_step_matches_it_within_the_bounds(llm: Path, tmp_path: Path) -> None:
    sample = _fit_and_sample(llm, tmp_path / "synthetic", seed=7)
    network = _switch(tmp_path, 8)
    _assert_within_bounds(compare_workloads(llm, sample, system=SYSTEM, network=network))


def test_fit_finds_the_layer_motif_of_a_transformer(llm: Path) -> None:
    _, report = fit_workload([llm])
    layers = [m for m in report.motifs if m.role == "layer"]
    # each pipeline stage holds 16 of the 32 layers; the first layer of a run depends on what came
    # before it, so it stands alone and its 15 followers repeat
    assert layers and {m.count for m in layers} <= {LLAMA_LAYERS // 2 - 1, LLAMA_LAYERS // 2}
    assert report.data_parallel is not None and report.data_parallel.size == LLM_SPEC["parallel"]["dp"]


def test_twice_the_layers_matches_a_model_generated_with_twice_the_layers(llm: Path, tmp_path: Path) -> None:
    sample = _fit_and_sample(llm, tmp_path / "synthetic", layers=LayerScale(factor=2), seed=3)
    (tmp_path / "deeper").mkdir()
    deeper = _llm(tmp_path / "deeper", 2 * LLAMA_LAYERS)
    report = compare_workloads(deeper, sample, system=SYSTEM, network=_switch(tmp_path, 8))
    assert report.row("busy ns per rank", "compute").difference < BYTES_BOUND
    assert report.row("bytes per rank", "ALL_REDUCE").difference < BYTES_BOUND
    assert report.row("time", "simulated step (ns)").difference < SIM_BOUND


@pytest.mark.parametrize("ranks", [2, 4, 16, 64])
def test_a_gloo_job_widened_to_more_ranks_validates_simulates_and_keeps_per_rank_figures(
    gloo_job: Path, tmp_path: Path, ranks: int
) -> None:
    sample = _fit_and_sample(gloo_job, tmp_path / "wide", ranks=ranks, seed=1)
    assert run_cli("validate", str(sample)).returncode == 0
    report = compare_workloads(
        gloo_job, sample, system=SYSTEM, network=_switch(tmp_path, 2), sample_network=_switch(tmp_path, ranks)
    )
    assert report.sample_ranks == ranks
    assert report.row("time", "simulated step (ns)").sample > 0  # simulated to the end
    # the step's length is held to its bound on the generated (deterministic) models above: a live
    # recording on a loaded machine has outlier durations that move a sampled step by more
    failed = [(r.group, r.name, r.difference) for r in report.failed() if r.group != "time"]
    assert not failed, failed


@pytest.mark.parametrize("ranks", [16, 64])
def test_an_llm_step_widened_along_data_parallelism_widens_its_groups(llm: Path, tmp_path: Path, ranks: int) -> None:
    sample = _fit_and_sample(llm, tmp_path / "wide", ranks=ranks, seed=1)
    assert run_cli("validate", str(sample)).returncode == 0
    groups = open_workload(sample, whole=True).comm_groups
    tp, pp = LLM_SPEC["parallel"]["tp"], LLM_SPEC["parallel"]["pp"]
    sizes = sorted(len(members) for members in groups.values())
    assert sizes.count(tp) == ranks // tp  # tensor-parallel pairs copied per replica
    assert sizes.count(ranks // (tp * pp)) == tp * pp  # data-parallel groups span every replica
    report = compare_workloads(
        llm, sample, system=SYSTEM, network=_switch(tmp_path, 8), sample_network=_switch(tmp_path, ranks)
    )
    assert report.row("time", "simulated step (ns)").sample > 0
    assert report.ok, [(r.group, r.name, r.difference) for r in report.failed()]


def test_more_steps_chain_copies_of_a_one_step_source(llm: Path, tmp_path: Path) -> None:
    sample = _fit_and_sample(llm, tmp_path / "steps", steps=3, seed=1)
    source, tripled = load_table(f"{llm}.0.et"), load_table(f"{sample}.0.et")
    assert len(tripled) == 3 * len(source)
    report = compare_workloads(llm, sample)
    critical = report.row("time", "critical path (ns)")
    assert critical.sample == pytest.approx(3 * critical.source, rel=0.05)


def test_the_model_and_the_sample_hold_no_string_of_the_source(gloo_job: Path, tmp_path: Path) -> None:
    model, report = fit_workload([gloo_job])
    data = msgspec.json.encode(model)
    assert report.strings and model_leaks(data, report.strings) == []
    sample = tmp_path / "synthetic"
    sample_workload(model, sample, seed=1)
    strings = StringSet()
    for text in report.strings:
        strings.add(text)
    files = sorted(tmp_path.glob("synthetic.*.et"))
    names = {name for path in files for name in load_table(path).name_list}
    assert find_leaks(strings, files, generated=names) == []


def test_the_leak_check_of_a_model_finds_a_planted_source_string(gloo_job: Path) -> None:
    model, report = fit_workload([gloo_job])
    secret = max(report.strings, key=len)
    planted = msgspec.json.encode(model).replace(b'"chakra-synth-model"', json.dumps(secret).encode())
    assert secret in model_leaks(planted, report.strings)


def test_the_same_seed_samples_the_same_workload_and_another_seed_another(llm: Path, tmp_path: Path) -> None:
    model, _ = fit_workload([llm])
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        sample_workload(model, tmp_path / name, seed=seed)
    a, b, c = (Path(f"{tmp_path / n}.0.et").read_bytes() for n in "abc")
    assert a == b and a != c


def test_nested_repeats_become_nested_motifs() -> None:
    step = [7, *([1, 2, 3] * 4), 8]
    grammar = tandem_grammar(np.array(step * 3))
    assert len(grammar) == 1 and isinstance(grammar[0], Repeat) and grammar[0].count == 3
    inner = grammar[0].body
    assert any(isinstance(item, Repeat) and item.count == 4 and item.body == [Literal(1, 4)] for item in inner)


def test_cli_fits_samples_and_reports_fidelity(llm: Path, tmp_path: Path) -> None:
    model = tmp_path / "llama.synth.json"
    fitted = run_cli("synth", "fit", str(llm), "-o", str(model))
    assert fitted.returncode == 0, fitted.stderr
    assert "leakage check passed" in fitted.stdout
    network = _switch(tmp_path, 8)
    done = run_cli(
        "synth", "sample", str(model), "-o", str(tmp_path / "synthetic"), "--seed", "4", "--compare", str(llm),
        "--system", str(SYSTEM), "--network", str(network), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["fidelity"]["ok"] is True


def test_cli_refuses_a_rank_count_the_replicas_do_not_divide(llm: Path, tmp_path: Path) -> None:
    model = tmp_path / "llama.synth.json"
    save_model(fit_workload([llm])[0], model)
    done = run_cli("synth", "sample", str(model), "-o", str(tmp_path / "out"), "--ranks", "6")
    assert done.returncode == 2 and "not a multiple of 4" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_cli_refuses_a_model_of_another_version(llm: Path, tmp_path: Path) -> None:
    model = tmp_path / "llama.synth.json"
    save_model(fit_workload([llm])[0], model)
    data = json.loads(model.read_text())
    data["version"] = MODEL_VERSION + 1
    model.write_text(json.dumps(data))
    done = run_cli("synth", "sample", str(model), "-o", str(tmp_path / "out"))
    assert done.returncode == 2 and f"version {MODEL_VERSION + 1}" in done.stderr


def test_cli_refuses_a_layer_scale_that_is_not_one(tmp_path: Path) -> None:
    model = tmp_path / "any.synth.json"
    model.write_text("{}")
    done = run_cli("synth", "sample", str(model), "-o", str(tmp_path / "out"), "--layers", "twice")
    assert done.returncode == 2 and "neither a count nor a factor" in done.stderr
