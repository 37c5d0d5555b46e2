"""Run ASTRA-sim's own binary on a workload and read what it printed, to set beside ``chakra simulate``.

ASTRA-sim prints ``sys[N] finished, T cycles, exposed communication E cycles.`` for every rank that
finishes (``reference/astra-sim.md`` §6). :func:`run_astra_sim` runs one of its analytical backends
in a temporary folder (it writes ``./log/`` where it runs) and returns those figures with its exit
code; :func:`compare` sets them beside a :class:`~chakra.sim.results.SimResult`.

Known behaviour of ASTRA-sim's builds that the caller must read around (its bugs, not the
workload's): at exit, where one rank belongs to two communicator groups using the same collective
type, it may crash after printing its results (a double free in its communicator-group teardown:
SIGABRT, or SIGSEGV when its logger's shutdown meets the corrupted heap first), and its asynchronous
logger may then lose some ``finished`` lines; PER_NODE_MEMORY_EXPANSION remote memory segfaults.

Example:
    ran = run_astra_sim("bin/AstraSim_Analytical_Congestion_Unaware", "runs/job", "sys.json", "net.yml")
    ran.ranks[0].finish_ns, ran.returncode
"""

from __future__ import annotations

import re
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from chakra.errors import ChakraInputError, PathLike
from chakra.paths import groups_path
from chakra.sim.results import SimResult

#: ASTRA-sim's line for a finished rank (cycles are ns).
FINISHED_LINE = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+) cycles")
#: Remote memory configuration every run without remote memory uses (ASTRA-sim's own example).
NO_MEMORY_EXPANSION = '{"memory-type": "NO_MEMORY_EXPANSION"}'
#: Lines of ASTRA-sim's output kept for diagnosis.
OUTPUT_TAIL_LINES = 20
#: A run that prints nothing for this long is taken to hang (seconds).
DEFAULT_TIMEOUT_S = 600.0
#: Exit codes (as subprocess reports a signal) of ASTRA-sim's crash at exit where a rank is in two
#: groups using one collective type: the double free aborts it, or (about one run in thirty here)
#: the heap it corrupted segfaults its logger's shutdown first (under gdb: ``malloc_consolidate``
#: from ``spdlog::details::registry::drop_all``). Its results are printed by then.
CRASHED_AT_EXIT = (-signal.SIGABRT, -signal.SIGSEGV)


@dataclass(frozen=True)
class AstraRank:
    """What ASTRA-sim printed for one finished rank: finish time and exposed communication (ns)."""

    finish_ns: int
    exposed_comm_ns: int


@dataclass
class AstraRun:
    """One run of ASTRA-sim's binary: its exit code, the ranks that finished, the end of its output."""

    returncode: int
    ranks: dict[int, AstraRank] = field(default_factory=dict)
    output_tail: str = ""
    timed_out: bool = False


def run_astra_sim(
    binary: PathLike,
    workload: PathLike,
    system: PathLike,
    network: PathLike,
    *,
    remote_memory: PathLike | None = None,
    comm_groups: PathLike | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cwd: PathLike | None = None,
) -> AstraRun:
    """Run ASTRA-sim's ``binary`` on ``workload`` (the prefix of ``PREFIX.{rank}.et``) with the given
    system JSON and network YAML; ``comm_groups`` defaults to ``PREFIX.comm_groups.json`` when it
    exists and defines a group; ``cwd`` is the folder it runs in (it reads a custom algorithm's
    relative prefix from there; default a temporary one). Raises :class:`ChakraInputError` when the
    binary cannot be run."""
    binary, prefix = Path(binary).resolve(), Path(workload).resolve()
    if not binary.is_file():
        raise ChakraInputError("ASTRA-sim binary not found", path=binary, hint="build ASTRA-sim or give its path")
    groups = Path(comm_groups).resolve() if comm_groups is not None else groups_path(prefix)
    with tempfile.TemporaryDirectory(prefix="chakra-astra-") as folder:
        if remote_memory is None:
            remote_memory = Path(folder) / "no_memory_expansion.json"
            Path(remote_memory).write_text(NO_MEMORY_EXPANSION)
        command = [
            str(binary),
            f"--workload-configuration={prefix}",
            f"--system-configuration={Path(system).resolve()}",
            f"--network-configuration={Path(network).resolve()}",
            f"--remote-memory-configuration={Path(remote_memory).resolve()}",
        ]
        if groups.is_file() and groups.read_text().strip() not in ("", "{}"):
            command.append(f"--comm-group-configuration={groups}")
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout_s, cwd=cwd if cwd is not None else folder
            )
        except subprocess.TimeoutExpired as expired:
            output = _text(expired.stdout) + _text(expired.stderr)
            return AstraRun(-1, _finished(output), _tail(output), timed_out=True)
        except OSError as error:
            raise ChakraInputError(f"cannot run ASTRA-sim: {error.strerror}", path=binary) from None
    output = done.stdout + done.stderr
    if "error while loading shared libraries" in output:
        raise ChakraInputError(
            f"ASTRA-sim cannot start: {_tail(output)}", path=binary, hint="install what it links (libprotobuf32)"
        )
    return AstraRun(done.returncode, _finished(output), _tail(output))


def compare(ours: SimResult, theirs: AstraRun) -> dict[int, tuple[AstraRank, AstraRank | None]]:
    """Rank -> (ours, ASTRA-sim's or ``None`` when it printed nothing for the rank)."""
    return {
        rank: (AstraRank(state.finish_ns, state.astra_exposed_comm_ns), theirs.ranks.get(rank))
        for rank, state in sorted(ours.ranks.items())
    }


def _finished(output: str) -> dict[int, AstraRank]:
    return {int(r): AstraRank(int(t), int(e)) for r, t, e in FINISHED_LINE.findall(output)}


def _tail(output: str) -> str:
    return "\n".join(output.strip().splitlines()[-OUTPUT_TAIL_LINES:])


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")
