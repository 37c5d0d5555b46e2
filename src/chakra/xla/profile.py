"""What a JAX profile measured of an XLA program: each HLO instruction's start and duration per device.

``jax.profiler.start_trace(DIR)`` writes ``DIR/plugins/profile/RUN/HOST.trace.json.gz``, a
Chrome trace whose per-op events carry ``hlo_module``, ``hlo_op``, ``device_ordinal`` and
``run_id`` (one run per executed step). :func:`load_profile` reads it (a folder is searched for the
newest such file); :meth:`Profile.timings` gives one run of one module on one device: every
instruction's executions in order, so the ``k``-th execution of an instruction inside an unrolled
loop is its ``k``-th iteration. By default that is the run :meth:`Profile.step_run` picks: the
complete step of median span, the same run on every device.

Example:
    profile = load_profile("prof")
    profile.timings("jit_step", device=0)["all-reduce"]     # [(start µs, duration µs)]
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from chakra import io
from chakra.errors import ChakraFormatError, ChakraInputError, PathLike
from chakra.steps import StepRun, step_to_convert

#: What the profiler names its Chrome trace files.
TRACE_GLOB = "*.trace.json*"


class _Args(msgspec.Struct):
    hlo_module: str | None = None
    hlo_op: str | None = None
    device_ordinal: str | int | None = None
    run_id: str | int | None = None


class _Event(msgspec.Struct):
    ph: str = ""
    ts: float = 0.0
    dur: float = 0.0
    args: _Args = msgspec.field(default_factory=_Args)


class _Trace(msgspec.Struct):
    traceEvents: list[_Event] = msgspec.field(default_factory=list)


#: One execution of an instruction: start and duration, µs.
Timing = tuple[float, float]


@dataclass
class Profile:
    """The measured executions: (module, device, run) -> instruction name -> executions in order."""

    path: str
    runs: dict[tuple[str, int, str], dict[str, list[Timing]]] = field(default_factory=dict)

    @property
    def modules(self) -> set[str]:
        return {module for module, _, _ in self.runs}

    def timings(self, module: str, device: int, run: str | None = None) -> dict[str, list[Timing]]:
        """One run of ``module`` on ``device``: ``run``, by default :meth:`step_run`."""
        chosen = run if run is not None else self.step_run(module)
        ops = self.runs.get((module, device, chosen))
        if ops is None:
            raise ChakraInputError(
                f"the profile has no run {chosen!r} of module {module!r} on device {device}",
                path=self.path,
                hint="profile every device of the program (one process records them all in JAX)",
            )
        return ops

    def step_runs(self, module: str) -> list[StepRun]:
        """Every run of ``module``, in the order they started, with its span over all devices."""
        spans: dict[str, list[float]] = {}
        counts: Counter[str] = Counter()
        for (name, _, run), ops in self.runs.items():
            if name != module:
                continue
            executions = [t for timings in ops.values() for t in timings]
            first, last = min(s for s, _ in executions), max(s + d for s, d in executions)
            known = spans.setdefault(run, [first, last])
            known[0], known[1] = min(known[0], first), max(known[1], last)
            counts[run] += len(executions)
        if not spans:
            found = ", ".join(sorted(self.modules)) or "none"
            raise ChakraInputError(
                f"the profile has no run of module {module!r} (its modules: {found})",
                path=self.path,
                hint="profile the same program that was compiled (a profile from another program does not join)",
            )
        runs = [StepRun(run, first, last - first, counts[run]) for run, (first, last) in spans.items()]
        return sorted(runs, key=lambda r: r.start_us)

    def step_run(self, module: str) -> str:
        """The run that stands for a step of ``module`` (:func:`chakra.steps.step_to_convert`: the
        complete run of median span), the same on every device."""
        return step_to_convert(self.step_runs(module)).run


def load_profile(path: PathLike) -> Profile:
    """Read a JAX profile's Chrome trace (a file, or the newest one under a folder)."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.rglob(TRACE_GLOB), key=lambda p: p.stat().st_mtime)
        if not found:
            raise ChakraInputError(
                f"no {TRACE_GLOB} under this folder", path=path, hint="pass the folder jax.profiler.start_trace wrote"
            )
        path = found[-1]
    stream, _ = io.open_decompressed(path, what="a JAX profile")
    try:
        data = stream.read()
    finally:
        stream.close()
    try:
        trace = msgspec.json.decode(data, type=_Trace)
    except msgspec.DecodeError as exc:
        raise ChakraFormatError(f"not a profiler trace: {exc}", path=path, hint="pass *.trace.json.gz") from None
    runs: dict[tuple[str, int, str], dict[str, list[Timing]]] = defaultdict(lambda: defaultdict(list))
    for event in trace.traceEvents:
        args = event.args
        if event.ph != "X" or args.hlo_op is None or args.hlo_module is None or args.device_ordinal is None:
            continue
        key = (args.hlo_module, int(args.device_ordinal), str(args.run_id))
        runs[key][args.hlo_op].append((event.ts, event.dur))
    if not runs:
        raise ChakraInputError(
            "the profile has no XLA op events (hlo_op, hlo_module, device_ordinal)",
            path=path,
            hint="profile a step of the jitted program with jax.profiler.start_trace",
        )
    for ops in runs.values():
        for executions in ops.values():
            executions.sort()
    return Profile(str(path), {key: dict(ops) for key, ops in runs.items()})
