"""A simulated run as a Chrome/Perfetto trace: one process per rank, one track per hardware slot.

Open the file in https://ui.perfetto.dev or ``chrome://tracing``. Every node is a complete event
(``ph: "X"``) on its rank (``pid``) and slot (``tid``: CPU, GPU compute, GPU comm; receives, which
take no slot, on "none"), named after the node, with its id in ``args``.

Chrome's ``ts``/``dur`` are microseconds; the simulator's time is nanoseconds, so both are divided
by 1000 (as floats: sub-µs nodes keep their length).

Example:
    >>> result = simulate_workload("out/job", system, network, keep_intervals=True)  # doctest: +SKIP
    >>> write_timeline(result, "job.trace.json")
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from chakra import io
from chakra.errors import ChakraInputError, PathLike
from chakra.sim.engine import SLOT_NAMES, SimResult

#: Chrome trace time unit: ``ts`` and ``dur`` are in µs; the simulation counts ns.
NS_PER_US = 1000.0
#: Tells the viewers to show times in ns (the simulation's resolution) although the fields are µs.
DISPLAY_TIME_UNIT = "ns"


def timeline_events(result: SimResult) -> list[dict[str, Any]]:
    """The Chrome trace events of ``result`` (metadata first, then one ``X`` event per node, by start time)."""
    if result.intervals is None:
        raise ChakraInputError(
            "the simulation kept no node intervals, so there is no timeline to write",
            hint="simulate with keep_intervals=True (chakra simulate --timeline FILE does)",
        )
    events: list[dict[str, Any]] = []
    for rank, spans in sorted(result.intervals.items()):
        names = (result.names or {}).get(rank, {})
        slot_names = result.slot_names.get(rank, list(SLOT_NAMES))
        events.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
        for slot in sorted({slot for *_, slot in spans}):
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": rank,
                    "tid": slot,
                    "args": {"name": slot_name(slot, slot_names)},
                }
            )
        for node_id, start_ns, end_ns, slot in sorted(spans, key=lambda span: (span[1], span[3], span[0])):
            events.append(
                {
                    "ph": "X",
                    "name": names.get(node_id, f"node {node_id}"),
                    "pid": rank,
                    "tid": slot,
                    "ts": start_ns / NS_PER_US,
                    "dur": (end_ns - start_ns) / NS_PER_US,
                    "args": {"node_id": node_id},
                }
            )
    return events


def write_timeline(result: SimResult, path: PathLike) -> None:
    """Write ``result`` as a Chrome/Perfetto trace JSON file at ``path`` (atomically); see :func:`timeline_events`."""
    document = {"traceEvents": timeline_events(result), "displayTimeUnit": DISPLAY_TIME_UNIT}
    with io.AtomicFile(Path(path)) as handle:
        handle.write(orjson.dumps(document))


def slot_name(slot: int, names: Sequence[str] = SLOT_NAMES) -> str:
    """The track name of hardware slot ``slot`` (per-thread and per-stream slots included)."""
    return names[slot] if 0 <= slot < len(names) else f"slot {slot}"
