"""A TensorFlow recording read back: every worker's step graphs and profile, and the step to convert.

:func:`load_recorded_workers` finds what :mod:`chakra.tensorflow.collect` wrote for each worker (its
``run_metadata.pb`` and ``profile/``). :func:`step_times` joins the profiles to the graphs:

* a profiled step (one ``step_id``) is a step of the step function when at least
  :data:`MIN_STEP_COVERAGE` of the function's working nodes ran in it and most of its events name
  the function's nodes (the others are the dataset's functions, counted);
* across workers the steps are joined by their collectives' instance keys, which all members of a
  collective share (steps without collectives, in a job whose step runs them, are other work);
  without collectives, by order;
* the step converted is :func:`chakra.steps.step_to_convert` of the joined steps: the complete one
  of median span, its span the longest over the workers.

Every profile event is counted: converted, in other steps, of other functions, with no step.

Example:
    times = step_times(load_recorded_workers(["out"]))
    times.chosen.run, sorted(times.executions)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from chakra.errors import ChakraInputError, PathLike
from chakra.steps import StepRun, step_to_convert
from chakra.tensorflow.collect import PROFILE_FOLDER, RUN_METADATA
from chakra.tensorflow.graph import FOLDED_OPS
from chakra.tensorflow.graph_table import GraphTable, read_step_tables
from chakra.tensorflow.profile import OpExecution, StepSummary, TfProfile, load_tf_profile
from chakra.units import NS_PER_US

#: The least share of a graph's working nodes a profile's step must run to be a step of that graph:
#: a step of the graph runs 80 % of them here (the rest, ``Reshape`` and the like, too cheap for the
#: executor to trace); another program's step that shares a few node names (``MatMul``) runs 10 %.
MIN_STEP_COVERAGE = 0.25


@dataclass
class Worker:
    """One worker's recording: the step function's partition graphs by device (as columns), and its
    profile."""

    path: Path
    tables: dict[str, GraphTable]
    profile: TfProfile | None


def load_recorded_workers(paths: list[PathLike]) -> list[Worker]:
    """Every worker under ``paths``: folders holding ``run_metadata.pb`` (and ``profile/``), folders
    of such folders (``OUT/worker{task}``), or ``run_metadata.pb`` files."""
    found: list[Path] = []
    for given in map(Path, paths):
        if given.is_file():
            found.append(given)
        elif (given / RUN_METADATA).is_file():
            found.append(given / RUN_METADATA)
        elif given.is_dir() and (inner := sorted(given.glob(f"*/{RUN_METADATA}"))):
            found.extend(inner)
        else:
            raise ChakraInputError(
                f"no {RUN_METADATA} here or in its folders",
                path=given,
                hint="pass the folder chakra.tensorflow.collect wrote (or the folder of every worker's)",
            )
    workers = []
    for path in found:
        tables = read_step_tables(path)
        profile_folder = path.parent / PROFILE_FOLDER
        workers.append(Worker(path, tables, load_tf_profile(profile_folder) if profile_folder.is_dir() else None))
    return workers


@dataclass
class StepTimes:
    """The step converted: device name -> node name -> its executions in that step; every joined
    step, the one chosen, and the profile events by what became of them."""

    executions: dict[str, dict[str, list[OpExecution]]]
    runs: list[StepRun]
    chosen: StepRun
    events: Counter[str] = field(default_factory=Counter)


def step_times(workers: list[Worker]) -> StepTimes:
    """The step to convert and every device's executions in it (see the module's docstring)."""
    events: Counter[str] = Counter()
    per_worker: list[dict[object, tuple[int, StepRun]]] = []
    summed: list[dict[int, StepSummary]] = []  # every worker's steps against its graph
    placed: list[dict[str, str]] = []  # every worker's node names -> their device
    for worker in workers:
        assert worker.profile is not None
        placed.append({name: device for device, table in worker.tables.items() for name in table.names})
        names = set(placed[-1])
        working = {
            name
            for table in worker.tables.values()
            for name, op in zip(table.names, table.ops, strict=True)
            if op not in FOLDED_OPS
        }
        summaries = worker.profile.step_summaries(names, working)
        summed.append(summaries)
        steps: dict[object, tuple[int, StepRun]] = {}
        matched_steps = []
        best = 0
        for step_id, summary in summaries.items():
            best = max(best, summary.covered)
            if summary.covered < MIN_STEP_COVERAGE * len(working) or 2 * summary.ours < summary.executions:
                events["of other functions"] += summary.executions
                continue
            assert summary.start_ns is not None and summary.end_ns is not None  # ours is not empty
            span_ns = summary.end_ns - summary.start_ns
            matched_steps.append((summary.instance_key, summary.start_ns, step_id, span_ns, summary.ours))
        if not matched_steps:
            raise ChakraInputError(
                f"the profile has no step of this graph: its steps run at most {best:,} of the "
                f"{len(working):,} nodes of the step function that do work",
                path=worker.profile.path,
                hint="convert a graph and a profile of the same run (both written by one chakra.tensorflow.collect)",
            )
        keyed = any(key is not None for key, *_ in matched_steps)
        if keyed:  # the step function runs collectives: a matched step without is other work
            for key, _, _, _, count in matched_steps:
                if key is None:
                    events["in steps with no collective"] += count
            matched_steps = [s for s in matched_steps if s[0] is not None]
        for index, (key, start_ns, step_id, span_ns, count) in enumerate(sorted(matched_steps, key=lambda s: s[1])):
            run = StepRun(str(key if keyed else index), start_ns / NS_PER_US, span_ns / NS_PER_US, count)
            steps[key if keyed else index] = (step_id, run)
        per_worker.append(steps)
        events["with no step"] += worker.profile.stepless
    common = set(per_worker[0]).intersection(*per_worker[1:])
    if not common:
        raise ChakraInputError("the workers' profiles share no step (no collective instance in common)",
                               path=workers[0].path, hint="record every worker over the same steps")  # fmt: skip
    joined = [
        StepRun(
            per_worker[0][key][1].run,
            min(steps[key][1].start_us for steps in per_worker),
            max(steps[key][1].span_us for steps in per_worker),
            sum(steps[key][1].executions for steps in per_worker),
        )
        for key in common
    ]
    joined.sort(key=lambda r: r.start_us)
    chosen = step_to_convert(joined)
    chosen_key = next(k for k in common if per_worker[0][k][1].run == chosen.run)
    out: dict[str, dict[str, list[OpExecution]]] = {}
    for worker, steps, summaries, device_of in zip(workers, per_worker, summed, placed, strict=True):
        assert worker.profile is not None
        for step_id, summary in summaries.items():
            if any(s[0] == step_id for s in steps.values()) and step_id != steps[chosen_key][0]:
                events["in other steps"] += summary.executions
        ops = worker.profile.step(steps[chosen_key][0])
        # counted here and added once (the counter's keys in the order the ops first give them)
        counted: dict[str, int] = {}
        for name, runs in ops.items():
            device = device_of.get(name)
            if device is None:
                counted["in the step, of no graph node"] = counted.get("in the step, of no graph node", 0) + len(runs)
                continue
            by_name = out.get(device)  # not setdefault: that makes an empty dict for every op
            if by_name is None:
                by_name = out[device] = {}
            by_name[name] = runs
            counted["converted"] = counted.get("converted", 0) + len(runs)
        for kind, count in counted.items():
            events[kind] += count
    return StepTimes(out, joined, chosen, events)
