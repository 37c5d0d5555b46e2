"""The replay's own timeline: the last measured iteration of every rank as a Chrome/Perfetto trace.

One process per rank; in it a track per thread and stream its compute ran on (the recorded track
of each node: ``thread 1234``, ``stream 7``, else ``CPU``/``GPU compute``), and one per
communicator group its communication ran in (``communication`` for the whole job and for sends and
receives, ``communication group 3``). Spans that overlap on one track (two collectives in flight
in one group) go to the next free lane of it (``communication (2)``), since a Chrome trace nests
the spans of a track. Times are µs from the iteration's start; communication spans run from issue
to completion (:class:`chakra.replay.issue.IterationTimes`).

Example:
    replay = replay_workload("out/job", timeline=True)
    write_timeline(replay, "replay.json")    # open in ui.perfetto.dev or chrome://tracing
"""

from __future__ import annotations

import json
from typing import Any

from chakra.errors import PathLike
from chakra.io import AtomicFile
from chakra.replay.launch import WorkloadReplay
from chakra.replay.measure import comm_type_label
from chakra.replay.program import IssueProgram, Kind, issue_program
from chakra.table import DEFAULT_GROUP_ID, MISSING, load_table
from chakra.units import NS_PER_US

#: The track of communication in the whole job, and of sends and receives.
COMMUNICATION = "communication"


def _track(program: IssueProgram, step: int, kind: Kind) -> str:
    if kind is Kind.COMPUTE:
        track = int(program.track[step])
        return program.track_names[track] if track >= 0 else "compute"
    group = int(program.group[step])
    if kind is Kind.COLLECTIVE and group not in (DEFAULT_GROUP_ID, MISSING):
        return f"{COMMUNICATION} group {group}"
    return COMMUNICATION


def timeline_events(replay: WorkloadReplay) -> list[dict[str, Any]]:
    """The Chrome trace events of ``replay`` (see the module's docstring)."""
    events: list[dict[str, Any]] = []
    for rank, ranked in replay.ranks.items():
        program = issue_program(load_table(ranked.path, rank))
        events.append({"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}})
        lanes: dict[str, list[int]] = {}  # track -> the end of the last span on each of its lanes
        for step, start_ns, end_ns in sorted(ranked.spans, key=lambda span: (span[1], span[0])):
            kind = Kind(int(program.kind[step]))
            track = _track(program, step, kind)
            ends = lanes.setdefault(track, [])
            lane = next((i for i, last in enumerate(ends) if last <= start_ns), len(ends))
            if lane == len(ends):
                ends.append(end_ns)
            ends[lane] = end_ns
            args: dict[str, Any] = {"id": int(program.ids[step]), "kind": kind.name.lower()}
            if kind is not Kind.COMPUTE:
                args.update(comm_type=comm_type_label(program, step), comm_size=int(program.comm_size[step]))
            events.append({
                "ph": "X", "name": program.names[step], "pid": rank,
                "tid": track if lane == 0 else f"{track} ({lane + 1})",
                "ts": start_ns / NS_PER_US, "dur": (end_ns - start_ns) / NS_PER_US, "args": args,
            })  # fmt: skip
    return events


def write_timeline(replay: WorkloadReplay, path: PathLike) -> None:
    """Write :func:`timeline_events` of ``replay`` to ``path`` (atomically)."""
    with AtomicFile(path) as file:
        file.write(json.dumps({"traceEvents": timeline_events(replay), "displayTimeUnit": "ms"}).encode())
