"""``make demo``: the real pipeline, end to end, on a job it records itself.

:func:`run_demo` takes a short tour, every step printing one block (the command a user would type,
then what came out) and writing to ``demo-output/``:

1. record a 2-rank PyTorch training job on this machine's CPU with gloo (DDP, every other
   collective gloo runs and a send/recv ring: ``examples/collect_gloo.py``);
2. convert it as it ran, with the fidelity check against the measured span, and validate it; and
   convert it again from its profiler traces alone (``chakra convert kineto``), checked the same way;
3. analyze it (breakdown, critical path, ranks) and write the HTML report and a Perfetto timeline;
4. adapt it for ASTRA-sim and simulate it on two CPU hosts over 1 Gb Ethernet
   (``examples/astra``), then the same step with twice the bandwidth (the what-if) and with messages
   queueing on the shared links (the congestion-aware model), and write the report and the timeline
   of the simulated run;
5. replay it on two gloo processes and compare with the recording;
6. when JAX and TensorFlow are installed, record and convert a sharded JAX step and a TensorFlow
   MirroredStrategy step (each skipped with one line saying how to get it when not);
7. generate a Llama 3 8B training step for a 4-GPU NVLink node and simulate it.

It needs the repository's ``examples/`` (it runs from a clone, as ``make demo`` does) and PyTorch
(the ``dev`` extra). :class:`DemoResult` holds what each step found, for the test that runs it.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from chakra.errors import ChakraInputError
from chakra.units import NS_PER_MS, US_PER_MS

if TYPE_CHECKING:  # the library is imported step by step, as each one runs
    from chakra.schedule.rank import ScheduleResult

DEMO_DIR = Path("demo-output")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ASTRA = EXAMPLES / "astra"
#: The recorded job: 2 ranks, 4 steps (the first one warm-up), two 1024-wide layers on batches of 128
#: (gradients of 4 MiB: communication the network model notices).
RANKS, STEPS, HIDDEN, BATCH = 2, 4, 1024, 128
#: The what-if: every link's bandwidth times this.
WHAT_IF_BANDWIDTH = 2.0
#: The generated step: Llama 3 8B, 2-way tensor x 2-way pipeline parallel, 4 micro-batches of 2,048
#: tokens, on a 4-GPU NVLink-class switch (H100 NVLink 4: 450 GB/s per direction).
LLM_OVERRIDES = {"parallel.tp": 2, "parallel.pp": 2, "global_batch": 4, "model.seq_len": 2048}
LLM_NETWORK = "topology: [ Switch ]\nnpus_count: [ 4 ]\nbandwidth: [ 450.0 ]  # GB/s\nlatency: [ 500.0 ]  # ns\n"
LLM_PEAK_TFLOPS = 989  # H100 SXM, dense bf16
LLM_MEMORY_GBPS = 3350  # H100 SXM HBM3
#: How long the recorded job and the framework examples may take before the demo gives up (s).
JOB_TIMEOUT_S = 600


@dataclass
class DemoResult:
    """What each step found (times in µs unless named otherwise)."""

    out: Path
    fidelity: dict[int, float | None] = field(default_factory=dict)  # per rank: replayed vs measured span
    kineto_fidelity: dict[int, float | None] = field(default_factory=dict)  # the same, profiler traces alone
    validate_errors: int = -1
    report: Path | None = None
    simulated_ms: float = 0.0
    what_if_ms: float = 0.0
    contended_ms: float = 0.0  # the same step with messages queueing on shared links
    simulated_comm_ms: float = 0.0  # rank 0 of the simulated run: communication, and its exposed part
    simulated_exposed_ms: float = 0.0
    simulated_report: Path | None = None
    replayed_us: dict[int, float] = field(default_factory=dict)  # per rank: median replayed step
    recorded_us: dict[int, float | None] = field(default_factory=dict)
    frameworks: dict[str, str] = field(default_factory=dict)  # name -> what happened
    llm_ms: float = 0.0


def run_demo(out: Path = DEMO_DIR, *, say: Callable[[str], None] = print) -> DemoResult:
    """The tour of the module's docstring; raises on the first step that fails."""
    if not (EXAMPLES / "collect_gloo.py").exists():
        raise ChakraInputError("the demo runs from a clone of the repository (it uses examples/)", path=EXAMPLES)
    out.mkdir(parents=True, exist_ok=True)
    result = DemoResult(out)
    steps = (_record, _convert, _analyze, _simulate, _replay, _frameworks, _llm)
    for number, step in enumerate(steps, start=1):
        started = time.perf_counter()
        say(f"\n{number}. {(step.__doc__ or '').strip()}")
        step(result, say)
        say(f"   ({time.perf_counter() - started:.1f} s)")
    return result


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _shown(argument: str) -> str:
    """A path as the user would type it from here (relative when under the current folder)."""
    path = Path(argument)
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        return str(path.relative_to(Path.cwd()))
    return argument


def _run(command: list[str], say: Callable[[str], None]) -> None:
    say("   $ python " + " ".join(_shown(a) for a in command[1:]))
    done = subprocess.run(command, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit code {done.returncode}"
        raise ChakraInputError(f"{Path(command[1]).name} failed: {last}")


def _record(result: DemoResult, say: Callable[[str], None]) -> None:
    """Record a 2-rank PyTorch training job on this CPU (gloo: DDP, every collective, a send/recv ring)"""
    recorded = result.out / "recorded"
    _run([sys.executable, str(EXAMPLES / "collect_gloo.py"), str(recorded), "--ranks", str(RANKS), "--steps",
          str(STEPS), "--hidden", str(HIDDEN), "--batch", str(BATCH), "--port", str(_free_port())], say)  # fmt: skip
    files = sorted(p.name for p in recorded.iterdir())
    say(f"   {len(files)} traces in {recorded}/: {', '.join(files)}")


def _convert(result: DemoResult, say: Callable[[str], None]) -> None:
    """Convert it as it ran, check it against the measured time, and validate it"""
    from chakra.pytorch.workload import PYTORCH_FIDELITY_TOLERANCE, convert_workload
    from chakra.validate import ERROR, validate_set
    from chakra.workload import open_workload

    recorded, job = result.out / "recorded", result.out / "job"
    say(f"   $ chakra convert pytorch --host '{recorded}/host.{{rank}}.json' "
        f"--device '{recorded}/device.{{rank}}.json' -o {job} --check")  # fmt: skip
    converted = convert_workload(f"{recorded}/host.{{rank}}.json", f"{recorded}/device.{{rank}}.json", job, check=True)
    assert converted.fidelity is not None  # asked for
    for rank, fidelity in converted.fidelity.results.items():
        result.fidelity[rank] = fidelity.error
        shown = "-" if fidelity.error is None else f"{fidelity.error:+.1%}"
        measured_ms = (fidelity.measured_span_us or 0) / US_PER_MS
        say(f"   rank {rank}: {converted.conversion.reports[rank].node_count:,} nodes; replayed "
            f"{fidelity.predicted_span_us / US_PER_MS:,.1f} ms against {measured_ms:,.1f} ms measured ({shown}; "
            f"within {PYTORCH_FIDELITY_TOLERANCE:.0%} is the check)")  # fmt: skip
    _convert_kineto_only(result, say)
    findings = validate_set(open_workload(job, whole=True))
    result.validate_errors = sum(f.severity == ERROR for f in findings)
    for_astra = sum(f.severity == ERROR for f in validate_set(open_workload(job, whole=True), target="astra-sim"))
    say(f"   $ chakra validate {job}: {result.validate_errors} errors; for ASTRA-sim {for_astra} more "
        "(what it cannot take: adapted in step 4)")  # fmt: skip


def _convert_kineto_only(result: DemoResult, say: Callable[[str], None]) -> None:
    """The same job from its profiler traces alone, what most people have (no host trace)."""
    from chakra.kineto.workload import KINETO_FIDELITY_TOLERANCE, convert_kineto_workload

    recorded, job = result.out / "recorded", result.out / "job-kineto"
    say(f"   $ chakra convert kineto '{recorded}/device.*.json' -o {job} --check    (the profiler traces alone)")
    converted = convert_kineto_workload([f"{recorded}/device.*.json"], job, check=True)
    assert converted.fidelity is not None  # asked for
    reports = converted.conversion.reports
    for rank, fidelity in converted.fidelity.results.items():
        result.kineto_fidelity[rank] = fidelity.error
        shown = "-" if fidelity.error is None else f"{fidelity.error:+.1%}"
        say(
            f"   rank {rank}: {reports[rank].node_count:,} nodes, {reports[rank].window}; "
            f"replayed {shown} against the measured step (within {KINETO_FIDELITY_TOLERANCE:.0%} is the check)"
        )


def _analyze(result: DemoResult, say: Callable[[str], None]) -> None:
    """Explain where the time went: breakdown, critical path, ranks; the HTML report and a timeline"""
    from chakra.analyze.breakdown import breakdown
    from chakra.analyze.critical_path import critical_path
    from chakra.analyze.ranks import compare_ranks
    from chakra.viz.report import write_report
    from chakra.viz.timeline import write_trace_timeline
    from chakra.workload import open_workload

    job = result.out / "job"
    workload = open_workload(job)
    for rank, table in sorted(workload.tables.items()):
        b = breakdown(table)
        path = critical_path(table)
        say(f"   rank {rank}: {b.span_ns / NS_PER_MS:,.1f} ms: compute {b.compute_ns / NS_PER_MS:,.1f}, communication "
            f"{b.communication_ns / NS_PER_MS:,.1f} ({b.comm_exposed_ns / NS_PER_MS:,.1f} exposed), idle "
            f"{b.idle_ns / NS_PER_MS:,.1f}; critical path {path.length_ns / NS_PER_MS:,.1f} ms")  # fmt: skip
    comparison = compare_ranks(workload)
    late = ", ".join(
        f"rank {s.rank} last at {s.times_last} collectives, others waited {s.late_ns_total / NS_PER_MS:,.1f} ms"
        for s in comparison.stragglers[:1]
    )
    say(f"   $ chakra analyze ranks {job}: slowest rank {comparison.slowest_rank}; {late or 'no straggler'}")
    result.report = write_report(job, result.out / "report.html", title="recorded 2-rank gloo job")
    timeline = result.out / "job.timeline.json"
    quiet = logging.getLogger("chakra.viz.timeline")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the nodes left out are said below, in the step's block
    try:
        drawn = write_trace_timeline(workload, timeline)
    finally:
        quiet.setLevel(level)
    say(f"   $ chakra report {job} -o {result.report}   (open it in a browser)")
    say(f"   $ chakra viz timeline {job} -o {timeline}   (open it in ui.perfetto.dev; {sum(drawn.timed.values()):,} "
        f"nodes, {drawn.untimed_total} without a recorded start left out)")  # fmt: skip


def _simulate(result: DemoResult, say: Callable[[str], None]) -> None:
    """Adapt it for ASTRA-sim, simulate it on 2 hosts over 1 Gb Ethernet, with twice the bandwidth, with shared links"""
    from chakra.adapt import Target, adapt_workload
    from chakra.analyze.breakdown import breakdown
    from chakra.sim.choices import NetworkModel
    from chakra.sim.config import load_network, load_system, scale_network
    from chakra.sim.run import simulate_workload
    from chakra.sim.timed import write_timed_workload
    from chakra.table import load_table
    from chakra.viz.report import write_report
    from chakra.viz.timeline import write_simulation_timeline

    job, astra = result.out / "job", result.out / "astra"
    changes = adapt_workload(job, astra, Target.ASTRA_SIM).changes.counts
    say(f"   $ chakra adapt {job} -o {astra} --target astra-sim: {sum(changes.values())} changes "
        f"({', '.join(f'{n} {c.value}' for c, n in sorted(changes.items(), key=lambda kv: -kv[1])[:3])})")  # fmt: skip
    system_path, network_path = ASTRA / "system.json", ASTRA / "ethernet2.yml"
    system, network = load_system(system_path), load_network(network_path)
    base = simulate_workload(astra, system, network, keep_intervals=True)
    faster = simulate_workload(astra, system, scale_network(network, bandwidth_scale=WHAT_IF_BANDWIDTH))
    result.simulated_ms = max(r.finish_ns for r in base.ranks.values()) / NS_PER_MS
    result.what_if_ms = max(r.finish_ns for r in faster.ranks.values()) / NS_PER_MS
    command = (
        f"chakra simulate --workload {astra} --system {_shown(str(system_path))} --network {_shown(str(network_path))}"
    )
    say(f"   $ {command}: {result.simulated_ms:,.2f} ms a step")
    say(f"   $ {command} --bandwidth-scale {WHAT_IF_BANDWIDTH:g}: {result.what_if_ms:,.2f} ms "
        f"({result.what_if_ms / result.simulated_ms - 1:+.1%})")  # fmt: skip
    shared = simulate_workload(astra, system, network, network_model=NetworkModel.CONGESTION_AWARE)
    result.contended_ms = max(r.finish_ns for r in shared.ranks.values()) / NS_PER_MS
    say(f"   $ {command} --network-model congestion-aware: {result.contended_ms:,.2f} ms: messages queueing on "
        f"the shared links cost {result.contended_ms - result.simulated_ms:+,.2f} ms a step")  # fmt: skip
    simulated = result.out / "simulated" / "job"
    write_timed_workload(base, astra, simulated, note=f"{system_path.name}, {network_path.name}")
    b = breakdown(load_table(Path(f"{simulated}.0.et")))
    result.simulated_comm_ms = b.communication_ns / NS_PER_MS
    result.simulated_exposed_ms = b.comm_exposed_ns / NS_PER_MS
    result.simulated_report = write_report(simulated, result.out / "simulated-report.html", title="simulated step")
    write_simulation_timeline(base, result.out / "simulated.timeline.json")
    say(f"   simulated rank 0: communication {result.simulated_comm_ms:,.2f} ms, {result.simulated_exposed_ms:,.2f} "
        f"exposed; report {result.simulated_report}, timeline {result.out / 'simulated.timeline.json'}")  # fmt: skip


def _replay(result: DemoResult, say: Callable[[str], None]) -> None:
    """Replay it on two gloo processes on this machine and compare with the recording"""
    from chakra.replay.launch import replay_workload

    job = result.out / "job"
    say(f"   $ chakra replay {job}")
    replayed = replay_workload(job)
    for rank, outcome in sorted(replayed.ranks.items()):
        result.replayed_us[rank] = outcome.median_step_us
        result.recorded_us[rank] = outcome.recorded_span_us
        shown = "-" if outcome.error is None else f"{outcome.error:+.1%}"
        recorded = f"{outcome.recorded_span_us / US_PER_MS:,.1f} ms" if outcome.recorded_span_us else "-"
        say(f"   rank {rank}: replayed step {outcome.median_step_us / US_PER_MS:,.1f} ms (median of "
            f"{len(outcome.step_ns)}), recorded {recorded} ({shown})")  # fmt: skip


def _frameworks(result: DemoResult, say: Callable[[str], None]) -> None:
    """The other front ends, when installed: a sharded JAX step and a TensorFlow MirroredStrategy step"""
    for name, module, run in (("JAX", "jax", _jax), ("TensorFlow", "tensorflow", _tensorflow)):
        if importlib.util.find_spec(module) is None:
            result.frameworks[name] = "skipped"
            say(f"   {name}: skipped, not installed (pip install -e '.[dev]' brings it, as make does)")
            continue
        run(result, say)
        result.frameworks[name] = "converted"


def _worst(replays: Mapping[int, ScheduleResult]) -> str:
    """The replay error farthest from 0, shown (``-`` when nothing was measured)."""
    errors = [r.error for r in replays.values() if r.error is not None]
    return f"{max(errors, key=abs):+.1%}" if errors else "-"


def _jax(result: DemoResult, say: Callable[[str], None]) -> None:
    from chakra.xla.pipeline import convert_xla_files

    recorded = result.out / "jax"
    _run([sys.executable, str(EXAMPLES / "jax_sharded_mlp.py"), str(recorded), "--profile"], say)
    converted = convert_xla_files(recorded / "step.hlo.pb", result.out / "jax-et" / "step",
                                  profile=recorded / "profile", check=True)  # fmt: skip
    conversion = converted.conversion
    say(f"   $ chakra convert xla {recorded}/step.hlo.pb --profile {recorded}/profile -o {converted.written.prefix} "
        f"--check: {conversion.devices} devices, {len(conversion.groups.groups)} groups, replay worst "
        f"{_worst(converted.fidelity.results if converted.fidelity else {})}")  # fmt: skip


def _tensorflow(result: DemoResult, say: Callable[[str], None]) -> None:
    from chakra.tensorflow.pipeline import convert_tensorflow_recordings

    recorded = result.out / "tf"
    _run([sys.executable, str(EXAMPLES / "tf_mirrored_mlp.py"), str(recorded)], say)
    converted = convert_tensorflow_recordings([recorded], result.out / "tf-et" / "step", check=True)
    say(f"   $ chakra convert tensorflow {recorded} -o {converted.written.prefix} --check: "
        f"{len(converted.conversion.devices)} devices, replay worst "
        f"{_worst(converted.fidelity.results if converted.fidelity else {})}")  # fmt: skip


def _llm(result: DemoResult, say: Callable[[str], None]) -> None:
    """Generate a Llama 3 8B training step for a 4-GPU NVLink node (TP 2 x PP 2) and simulate it"""
    from chakra.generate.llm import generate_llm
    from chakra.generate.spec_input import resolve_spec
    from chakra.sim.config import load_network, load_system
    from chakra.sim.run import simulate_workload

    llama = result.out / "llama"
    spec = resolve_spec("llama3-8b", overrides=LLM_OVERRIDES)
    written = generate_llm(spec, llama)
    system, network = result.out / "h100-system.json", result.out / "nvlink4.yml"
    system.write_text(json.dumps({**json.loads((ASTRA / "system.json").read_text()), "local-mem-bw": LLM_MEMORY_GBPS,
                                  "peak-perf": LLM_PEAK_TFLOPS}, indent=2) + "\n")  # fmt: skip
    network.write_text(LLM_NETWORK)
    say(f"   $ chakra generate llm --preset llama3-8b --tp 2 --pp 2 --global-batch 4 --seq-len 2048 -o {llama}: "
        f"{written.world_size} ranks, {sum(written.nodes_per_stage):,} nodes a pipeline")  # fmt: skip
    simulated = simulate_workload(llama, load_system(system), load_network(network))
    result.llm_ms = max(r.finish_ns for r in simulated.ranks.values()) / NS_PER_MS
    exposed = max(r.comm_exposed_ns for r in simulated.ranks.values()) / NS_PER_MS
    say(f"   $ chakra simulate --workload {llama} --system {system} --network {network}: {result.llm_ms:,.1f} ms a "
        f"step, up to {exposed:,.1f} ms of it communication alone")  # fmt: skip


def demo_main() -> int:
    started = time.perf_counter()
    try:
        result = run_demo()
    except Exception as error:  # the tour stops at the step that failed, saying which
        print(f"\ndemo stopped: {error}", file=sys.stderr)
        return 1
    print(f"\ndone in {time.perf_counter() - started:.0f} s; open {result.report} and {result.simulated_report}, "
          f"and the *.timeline.json files in ui.perfetto.dev")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(demo_main())
