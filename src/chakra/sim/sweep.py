"""What-if sweeps: simulate one workload over a grid of scaling knobs and configuration overrides.

An *axis* is a knob and the values to try: ``compute-scale``, ``bandwidth-scale``, ``latency-scale``
(as ``chakra simulate`` has them), any system key (``preferred-dataset-splits``) or ``network.<key>``
(``network.latency``). :func:`grid` takes the cartesian product of the axes; :func:`run_sweep`
simulates every point in parallel (:func:`chakra.parallel.map_ranks`: local processes or Dask). The
configurations of every point are read and checked once, up front; the workload is loaded once per
worker process and simulated at every point that worker runs.

Example:
    points = grid({"bandwidth-scale": [0.5, 1, 2], "compute-scale": [0.5, 1]})
    len(points), points[0].label()
    # (6, 'compute-scale=0.5, bandwidth-scale=0.5')
    results = run_sweep("out/job", Scenario("sys.json", "net.yml"), points)
    write_plot(results, "sweep.png", "bandwidth-scale")
"""

from __future__ import annotations

import csv
import functools
import io as _io
import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from chakra.errors import ChakraInputError, PathLike
from chakra.groups import CommGroups
from chakra.io import AtomicFile
from chakra.parallel import map_ranks
from chakra.sim import config
from chakra.sim.choices import NetworkModel
from chakra.sim.config import NetworkConfig, RemoteMemoryConfig, SystemConfig
from chakra.sim.engine import simulate
from chakra.sim.program import RankProgram, program_of
from chakra.sim.results import SimulationStuck
from chakra.sim.run import check_network_covers, load_programs, open_simulated
from chakra.sim.scenario import Scenario
from chakra.table import load_table
from chakra.units import NS_PER_MS
from chakra.workload import open_workload

COMPUTE_SCALE, BANDWIDTH_SCALE, LATENCY_SCALE = "compute-scale", "bandwidth-scale", "latency-scale"
#: The axes that scale the workload or network rather than override a configuration key.
SCALE_AXES = (COMPUTE_SCALE, BANDWIDTH_SCALE, LATENCY_SCALE)
#: Axis names starting with this override a network key (``network.latency``); others a system key.
NETWORK_AXIS_PREFIX = "network."
#: Shown when an axis cannot be read.
AXIS_EXAMPLE = "bandwidth-scale=0.5,1,2,4"
#: Result columns of the CSV file, after the knobs.
RESULT_COLUMNS = ("finish_ns", "max_comm_exposed_ns", "total_compute_ns")
#: Plot file types, by suffix.
PLOT_FORMATS = {".png": "png", ".svg": "svg"}
#: What to tell users whose environment lacks matplotlib.
PLOT_INSTALL_HINT = "pip install 'chakra-et[plot]'"


@dataclass(frozen=True)
class SweepPoint:
    """One configuration to simulate: the three scales and the system/network keys it overrides."""

    compute_scale: float = 1.0
    bandwidth_scale: float = 1.0
    latency_scale: float = 1.0
    system_overrides: dict[str, Any] = field(default_factory=dict)
    network_overrides: dict[str, Any] = field(default_factory=dict)

    def on(self, scenario: Scenario) -> Scenario:
        """``scenario`` with this point's knobs on top (the point's overrides win; scales multiply)."""
        return replace(
            scenario,
            system_overrides={**scenario.system_overrides, **self.system_overrides},
            network_overrides={**scenario.network_overrides, **self.network_overrides},
            bandwidth_scale=scenario.bandwidth_scale * self.bandwidth_scale,
            latency_scale=scenario.latency_scale * self.latency_scale,
            compute_scale=scenario.compute_scale * self.compute_scale,
        )

    def knobs(self) -> dict[str, Any]:
        """Axis name -> value for every knob of the point (the three scales, then the overrides)."""
        return {
            COMPUTE_SCALE: self.compute_scale,
            BANDWIDTH_SCALE: self.bandwidth_scale,
            LATENCY_SCALE: self.latency_scale,
            **self.system_overrides,
            **{NETWORK_AXIS_PREFIX + key: value for key, value in self.network_overrides.items()},
        }

    def label(self, axes: Sequence[str] | None = None) -> str:
        """``"bandwidth-scale=2, compute-scale=0.5"``: the ``axes`` given (default: the knobs off their defaults)."""
        knobs = self.knobs()
        names = axes if axes is not None else self.changed()
        return ", ".join(f"{name}={show_value(knobs[name])}" for name in names) or "defaults"

    def changed(self) -> list[str]:
        """Names of the knobs off their defaults: scales other than 1, and every override."""
        knobs = self.knobs()
        return [name for name in knobs if name not in SCALE_AXES or knobs[name] != 1]


@dataclass(frozen=True)
class SweepResult:
    """What one point gave, in ns: the finish time, the worst rank's exposed communication (time it
    communicated and computed nothing), all compute."""

    point: SweepPoint
    finish_ns: int
    max_comm_exposed_ns: int
    total_compute_ns: int  # CPU + GPU compute, summed over ranks

    def as_dict(self) -> dict[str, Any]:
        """The knobs and results as one flat mapping (a CSV row, a JSON object)."""
        return {
            **self.point.knobs(),
            "finish_ns": self.finish_ns,
            "max_comm_exposed_ns": self.max_comm_exposed_ns,
            "total_compute_ns": self.total_compute_ns,
        }


# ---------------------------------------------------------------------------------------------
# Axes and the grid


def parse_axis(text: str) -> tuple[str, list[Any]]:
    """Split ``"bandwidth-scale=0.5,1,2"`` into the axis name and its values, each read as YAML
    (``8``, ``LIFO``, ``[100,50]``) the way ``--set`` reads one value."""
    name, sep, values_text = text.partition("=")
    name, values_text = name.strip(), values_text.strip()
    if not sep or not name:
        raise ChakraInputError(f"axis {text!r} is not NAME=VALUE,VALUE,...", hint=f"write e.g. --axis {AXIS_EXAMPLE}")
    if not values_text:
        raise ChakraInputError(f"axis {name!r} has no values after '='", hint=f"write e.g. --axis {name}=1,2")
    try:
        _, values = config.parse_override(f"{name}=[{values_text}]")
    except ChakraInputError:
        values = None
    if not isinstance(values, list) or not values or any(value is None for value in values):
        raise ChakraInputError(
            f"axis {name!r}: cannot read the values {values_text!r}",
            hint=f"write comma-separated values, e.g. --axis {AXIS_EXAMPLE} or --axis network.bandwidth=[100],[200]",
        )
    check_axis(name, values)
    return name, values


def check_axis(name: str, values: Sequence[Any]) -> None:
    """Raise :class:`ChakraInputError` unless ``name`` is a known knob and ``values`` fit it."""
    if not values:
        raise ChakraInputError(f"axis {name!r} has no values", hint=f"write e.g. --axis {name}=1,2")
    if name.startswith(NETWORK_AXIS_PREFIX):
        key = name[len(NETWORK_AXIS_PREFIX) :]
        if key not in config.NETWORK_KEYS:
            raise ChakraInputError(
                f"axis {name!r}: {key!r} is not a network key",
                hint=f"network keys are {', '.join(config.NETWORK_KEYS)}, e.g. --axis network.latency=[100],[500]",
            )
        return
    if name not in SCALE_AXES:
        if name not in config.KNOWN_SYSTEM_KEYS:
            raise ChakraInputError(
                f"axis {name!r} is not a scale, a system key or network.<key>",
                hint=f"use {', '.join(SCALE_AXES)}, a system key or network.<key>, e.g. --axis {AXIS_EXAMPLE}",
            )
        return
    # bandwidth must stay > 0 (a link of no bandwidth never delivers); compute and latency may reach 0
    strict = name == BANDWIDTH_SCALE
    for value in values:
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if number is None or not math.isfinite(number) or number < 0 or (strict and number == 0):
            relation = ">" if strict else ">="
            raise ChakraInputError(
                f"axis {name!r}: {value!r} is not a finite number {relation} 0",
                hint=f"write e.g. --axis {name}=0.5,1,2 (1 = as configured)",
            )


def grid(axes: Mapping[str, Sequence[Any]]) -> list[SweepPoint]:
    """Every combination of the ``axes`` values (name -> values), the first axis varying slowest.

    No axes give the one point with every knob at its default.
    """
    for name, values in axes.items():
        check_axis(name, values)
    names = list(axes)
    points = []
    for combination in itertools.product(*(axes[name] for name in names)):
        knobs = dict(zip(names, combination, strict=True))
        points.append(
            SweepPoint(
                compute_scale=float(knobs.pop(COMPUTE_SCALE, 1.0)),
                bandwidth_scale=float(knobs.pop(BANDWIDTH_SCALE, 1.0)),
                latency_scale=float(knobs.pop(LATENCY_SCALE, 1.0)),
                system_overrides={k: v for k, v in knobs.items() if not k.startswith(NETWORK_AXIS_PREFIX)},
                network_overrides={
                    k[len(NETWORK_AXIS_PREFIX) :]: v for k, v in knobs.items() if k.startswith(NETWORK_AXIS_PREFIX)
                },
            )
        )
    return points


# ---------------------------------------------------------------------------------------------
# Running


#: A rank file as a worker loads it: (rank, path, size in bytes, modification time in ns). The size
#: and time tell a worker that kept an older load of the same path (a Dask worker lives on) to reload.
_RankFile = tuple[int, str, int, int]


@dataclass(frozen=True)
class _WorkloadFiles:
    """The workload a worker loads: its rank files, or (``classes``) the prefix of a workload written
    as classes with its class files and mapping as ``files`` (each with rank -1)."""

    files: tuple[_RankFile, ...]
    classes: str | None = None


def _stamp(rank: int, path: Path) -> _RankFile:
    stat = path.stat()
    return rank, str(path), stat.st_size, stat.st_mtime_ns


@dataclass(frozen=True)
class _PointTask:
    """What a worker needs to simulate one point: the rank files, the groups, the point's
    configurations (read and checked in the caller) and the point (all picklable)."""

    rank_files: _WorkloadFiles
    comm_groups: CommGroups | None
    system: SystemConfig
    network: NetworkConfig
    remote_memory: RemoteMemoryConfig
    point: SweepPoint
    compute_scale: float = 1.0
    network_model: NetworkModel = NetworkModel.CONGESTION_UNAWARE


def run_sweep(
    workload: PathLike,
    scenario: Scenario,
    points: Sequence[SweepPoint],
    *,
    comm_groups_path: PathLike | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[SweepResult]:
    """Simulate ``workload`` once per point, ``scenario`` with the point on top (:meth:`SweepPoint.on`),
    in parallel (see :func:`chakra.parallel.map_ranks` for ``workers``/``scheduler``/``progress``);
    results in the order of ``points``.

    Every point's configuration is loaded and checked here first, so a bad override fails at once
    rather than after the first simulations. Each worker process loads the workload once, at its first
    point. A workload that cannot finish raises :class:`~chakra.sim.results.SimulationStuck` naming
    the point.
    """
    opened = open_simulated(workload, comm_groups_path)
    if opened.classes_path is not None:
        stamps = tuple(_stamp(-1, path) for path in [*dict.fromkeys(opened.files.values()), opened.classes_path])
        rank_files = _WorkloadFiles(stamps, opened.prefix)
    else:
        rank_files = _WorkloadFiles(tuple(_stamp(rank, path) for rank, path in sorted(opened.files.items())))
    tasks = []
    for point in points:
        at_point = point.on(scenario)
        system, network, remote_memory = at_point.load()
        check_network_covers(opened, network)
        tasks.append(_PointTask(rank_files, opened.comm_groups, system, network, remote_memory, point,
                                at_point.compute_scale, at_point.network_model))  # fmt: skip
    try:
        return map_ranks(
            _run_point, tasks, workers=workers, scheduler=scheduler, progress=progress, description="sweep"
        )
    finally:
        _programs.cache_clear()  # the points ran in this process: do not hold the workload after the sweep


@functools.lru_cache(maxsize=1)
def _programs(rank_files: _WorkloadFiles) -> dict[int, RankProgram]:
    """The workload's programs, loaded once per process: every point a worker runs reuses them."""
    if rank_files.classes is not None:
        return load_programs(open_workload(rank_files.classes), workers=1)
    return {rank: program_of(load_table(path, rank), rank) for rank, path, _, _ in rank_files.files}


def _run_point(task: _PointTask) -> SweepResult:
    """Simulate one point (runs in a worker process: a top-level function, found by import)."""
    try:
        result = simulate(
            _programs(task.rank_files),
            task.system,
            task.network,
            remote_memory=task.remote_memory,
            comm_groups=task.comm_groups,
            compute_scale=task.compute_scale,
            network_model=task.network_model,
        )
    except SimulationStuck as stuck:
        named = SimulationStuck(f"at {task.point.label()}: {stuck.message}", stuck.waiting, hint=stuck.hint)
        # the exception crosses back from the worker by pickle, which rebuilds it from ``args``
        named.args = (named.message, named.waiting)
        raise named from None
    stats = result.ranks.values()
    return SweepResult(
        point=task.point,
        finish_ns=result.finish_ns,
        max_comm_exposed_ns=max((s.comm_exposed_ns for s in stats), default=0),
        total_compute_ns=sum(s.cpu_ns + s.gpu_compute_ns for s in stats),
    )


# ---------------------------------------------------------------------------------------------
# Reading the results


def baseline_index(results: Sequence[SweepResult]) -> int | None:
    """Index of the point to compare against: the one closest to all defaults (fewest knobs off
    default, then scales nearest 1 on a log scale, then the first); ``None`` for no results."""
    if not results:
        return None

    def distance(point: SweepPoint) -> tuple[int, float]:
        scales = (point.compute_scale, point.bandwidth_scale, point.latency_scale)
        off_by = sum(abs(math.log(scale)) if scale > 0 else math.inf for scale in scales)
        return len(point.changed()), off_by

    return min(range(len(results)), key=lambda i: distance(results[i].point))


def speedups(results: Sequence[SweepResult]) -> list[float | None]:
    """Each point's speed-up over the baseline (:func:`baseline_index`): its finish time / the point's."""
    base = baseline_index(results)
    if base is None:
        return []
    base_ns = results[base].finish_ns
    return [base_ns / r.finish_ns if r.finish_ns > 0 else None for r in results]


def sweep_dict(results: Sequence[SweepResult]) -> dict[str, Any]:
    """The sweep as JSON-ready data: every point's knobs, results (ns) and speed-up, and the baseline."""
    base = baseline_index(results)
    return {
        "baseline": results[base].point.label() if base is not None else None,
        "points": [
            {**result.as_dict(), "speedup": speedup} for result, speedup in zip(results, speedups(results), strict=True)
        ],
    }


def write_csv(results: Sequence[SweepResult], path: PathLike) -> None:
    """One row per point: every knob, then the results in ns (lists written as JSON), atomically."""
    rows = [result.as_dict() for result in results]
    columns = list(dict.fromkeys(name for row in rows for name in row))
    buffer = _io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()})
    with AtomicFile(path) as handle:
        handle.write(buffer.getvalue().encode())


def write_plot(results: Sequence[SweepResult], path: PathLike, x_axis: str) -> None:
    """Plot finish time (ms) against ``x_axis``, one line per combination of the other axes that vary.

    PNG or SVG by the suffix of ``path``, written atomically. Needs matplotlib (``chakra-et[plot]``).
    """
    path = Path(path)
    image_format = PLOT_FORMATS.get(path.suffix.lower())
    if image_format is None:
        raise ChakraInputError(
            f"cannot tell the plot format from {path.name!r}", path=path, hint="name it .png or .svg"
        )
    if not results:
        raise ChakraInputError("no sweep results to plot", hint="give at least one point")
    knobs = [result.point.knobs() for result in results]
    names = list(dict.fromkeys(name for k in knobs for name in k))
    if x_axis not in names:
        raise ChakraInputError(
            f"the sweep has no axis {x_axis!r} to plot against", hint=f"use one of {', '.join(names)}"
        )
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ChakraInputError("plotting needs matplotlib", hint=PLOT_INSTALL_HINT) from None

    others = [name for name in names if name != x_axis and len({show_value(k.get(name)) for k in knobs}) > 1]
    x_values = list(dict.fromkeys(show_value(k.get(x_axis)) for k in knobs))
    numeric = all(isinstance(k.get(x_axis), (int, float)) and not isinstance(k.get(x_axis), bool) for k in knobs)
    lines: dict[str, list[tuple[Any, float]]] = {}
    for k, result in zip(knobs, results, strict=True):
        label = ", ".join(f"{name}={show_value(k.get(name))}" for name in others)
        x = k[x_axis] if numeric else x_values.index(show_value(k.get(x_axis)))
        lines.setdefault(label, []).append((x, result.finish_ns / NS_PER_MS))

    # Figure without pyplot: no global state, Agg (PNG) or the SVG backend chosen by the format
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.add_subplot()
    for label, xy in lines.items():
        xy.sort(key=lambda pair: pair[0])
        axes.plot([x for x, _ in xy], [y for _, y in xy], marker="o", label=label or None)
    if numeric and x_axis in SCALE_AXES and all(k[x_axis] > 0 for k in knobs):
        axes.set_xscale("log", base=2)  # scales are ratios: 0.5 and 2 sit equally far from 1
        ticks = sorted({k[x_axis] for k in knobs})
        axes.set_xticks(ticks, labels=[show_value(tick) for tick in ticks])
        axes.minorticks_off()
    elif not numeric:
        axes.set_xticks(range(len(x_values)), labels=x_values)
    axes.set_xlabel(x_axis)
    axes.set_ylabel("finish time (ms)")
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    if others:
        axes.legend(fontsize="small")
    with AtomicFile(path) as handle:
        figure.savefig(handle, format=image_format)


def show_value(value: Any) -> str:
    """A knob value as the user would type it (``2`` not ``2.0``, lists as ``[100, 50]``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)
