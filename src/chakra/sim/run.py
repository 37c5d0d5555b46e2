"""Simulate a workload on disk: find its rank files and groups, load them, run the engine.

The steps apart (:func:`open_simulated`, :func:`check_network_covers`, :func:`load_programs`) are
for callers that run one workload many times, as sweeps do: load once, simulate at every point.

Example:
    from chakra.sim.config import load_network, load_system
    result = simulate_workload("out/job", load_system("sys.json"), load_network("net.yml"))
    print("\\n".join(result.astra_lines()))
"""

from __future__ import annotations

import functools
import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chakra.errors import ChakraInputError, PathLike
from chakra.groups import CommGroups
from chakra.sim.choices import NetworkModel
from chakra.sim.config import NetworkConfig, RemoteMemoryConfig, SystemConfig
from chakra.sim.engine import simulate
from chakra.sim.matching import check_groups
from chakra.sim.program import RankProgram, program_of
from chakra.sim.results import SimResult
from chakra.table import NodeTable, load_table
from chakra.workload import Workload, open_workload

#: ASTRA-sim's convention: a comm-group path containing this means "no groups" (§1).
NO_GROUPS_MARKER = "empty"
#: How many missing ranks an error lists.
MISSING_SHOWN = 10
#: The model :func:`load_workers` decides by, measured with ``benchmarks/sim_bench.py`` on a 2-core
#: machine: loading a rank in one process (per file, and per byte of it), starting the load workers
#: (each imports the package), handing a program back (a share of its load time), and how much
#: faster than this process alone the workers must be expected to be.
LOAD_S_PER_FILE = 0.004
LOAD_BYTES_PER_S = 55e6
WORKER_START_S = 0.5
RESULT_SHARE = 0.5
WORKER_MARGIN = 0.8


def open_simulated(workload: PathLike, comm_groups_path: PathLike | None = None) -> Workload:
    """The workload of ``PREFIX.{rank}.et`` (a prefix, a folder or one of its files: every rank) with
    the groups the simulator uses: ``comm_groups_path`` (a path containing ``empty``: none), else
    ``PREFIX.comm_groups.json`` beside the files."""
    opened = open_workload(workload, whole=True)
    if comm_groups_path is not None and NO_GROUPS_MARKER in str(comm_groups_path):
        return opened.with_comm_groups(None)
    if comm_groups_path is not None:
        return opened.with_comm_groups(CommGroups.read(comm_groups_path), Path(comm_groups_path))
    return opened


def check_network_covers(workload: Workload, network: NetworkConfig) -> None:
    """Raise unless every NPU of ``network`` has its rank file (ASTRA-sim stops on a missing one) and
    every group's ranks are NPUs of the network."""
    check_groups(workload.comm_groups, network.num_npus, workload.comm_groups_path)
    missing = [r for r in range(network.num_npus) if r not in workload.files]
    if missing:
        shown = ", ".join(map(str, missing[:MISSING_SHOWN])) + (" ..." if len(missing) > MISSING_SHOWN else "")
        raise ChakraInputError(
            f"the network has {network.num_npus} NPUs but ranks {shown} have no ET file",
            path=workload.prefix,
            hint="give every rank its PREFIX.{rank}.et, or a network whose npus_count matches the workload",
        )


def load_programs(
    workload: Workload, *, cpu_per_thread: bool = False, gpu_per_stream: bool = False, workers: int | None = None
) -> dict[int, RankProgram]:
    """Every rank's program, by rank (``cpu_per_thread``/``gpu_per_stream``: see :func:`chakra.sim.program.program_of`).

    Ranks load in ``workers`` local processes (:meth:`chakra.workload.Workload.map`), which hand back
    each program as its compact columns; by default as many as :func:`load_workers` finds worth starting.
    Ranks whose programs are equal but for their groups and peers share one program's columns (made
    read-only), each with its own groups and peers: memory grows with the distinct programs, not
    the ranks. A workload written as classes (:mod:`chakra.class_layout`) loads each class file once,
    here, and gives each rank its groups and peers from the mapping.
    """
    if workload.classes is not None:
        return _class_programs(workload, cpu_per_thread=cpu_per_thread, gpu_per_stream=gpu_per_stream)
    if workers is None:
        workers = load_workers(workload)
    build = functools.partial(
        _loaded_program, call=uuid.uuid4().hex, cpu_per_thread=cpu_per_thread, gpu_per_stream=gpu_per_stream
    )
    shared: dict[bytes, RankProgram] = {}
    programs = {}
    for rank, loaded in workload.map(build, workers=workers).results.items():
        if loaded.program is not None and loaded.digest not in shared:
            for column in loaded.program.columns:
                column.flags.writeable = False  # shared by every rank whose program equals it
            shared[loaded.digest] = loaded.program
        programs[rank] = loaded.of(shared[loaded.digest])
    _HANDED_BACK.pop(build.keywords["call"], None)  # ranks loaded in this process
    return programs


def _class_programs(workload: Workload, *, cpu_per_thread: bool, gpu_per_stream: bool) -> dict[int, RankProgram]:
    """Every rank's program from its class's, loaded once per class file."""
    assert workload.classes is not None
    shared: dict[Path, RankProgram] = {}
    programs = {}
    for rank, path in workload.files.items():
        entry = workload.classes.ranks[rank]
        program = shared.get(path)
        if program is None:
            representative = workload.classes.classes[entry.class_index].representative
            table = load_table(path, representative)
            program = shared[path] = program_of(table, representative, cpu_per_thread=cpu_per_thread,
                                                gpu_per_stream=gpu_per_stream)  # fmt: skip
            for column in program.columns:
                column.flags.writeable = False  # shared by every rank of the class
        renaming = workload.renaming(rank)
        assert renaming is not None
        c = program.columns
        identity = (renaming.groups_of(c.comm_group).astype(c.comm_group.dtype),
                    renaming.peers_of(c.comm_src).astype(c.comm_src.dtype),
                    renaming.peers_of(c.comm_dst).astype(c.comm_dst.dtype))  # fmt: skip
        programs[rank] = _with_identity(program, rank, path, identity)
    return programs


def load_workers(workload: Workload) -> int:
    """How many processes load ``files`` best: one per usable CPU (at most one per rank) when their
    estimated time beats this process's alone by :data:`WORKER_MARGIN`, else one (this process).

    Alone, each rank costs :data:`LOAD_S_PER_FILE` and its bytes at :data:`LOAD_BYTES_PER_S`. Workers
    cost :data:`WORKER_START_S` to start, take at least as long as the largest rank, and after it
    come back with its program (:data:`RESULT_SHARE` of its load time): a few ranks, however large,
    load faster here; hundreds of ranks, in workers.
    """
    workers = min(len(workload.files), usable_cpus())
    if workers < 2:
        return 1
    rank_s = [LOAD_S_PER_FILE + _file_size(path) / LOAD_BYTES_PER_S for path in workload.files.values()]
    serial_s, largest_s = sum(rank_s), max(rank_s)
    parallel_s = WORKER_START_S + max(serial_s / workers, largest_s) + RESULT_SHARE * largest_s
    return workers if parallel_s < WORKER_MARGIN * serial_s else 1


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # loading the rank says what is wrong with it


#: Per loading call, the programs this process has handed back whole: another rank with an equal
#: program comes back as its groups and peers alone (:class:`_Loaded`).
_HANDED_BACK: dict[str, set[bytes]] = {}
#: The columns that make one rank's program differ from another's that is equal but for its groups and peers.
_IDENTITY = ("comm_group", "comm_src", "comm_dst")


@dataclass
class _Loaded:
    """One rank as a loading worker hands it back: its program (``None``: equal to one handed back
    before, ``digest`` says which) and the columns of its own groups and peers."""

    rank: int
    path: Path
    digest: bytes
    identity: tuple[np.ndarray, ...]
    program: RankProgram | None

    def of(self, shared: RankProgram) -> RankProgram:
        """This rank's program, sharing every column but its groups and peers with ``shared``."""
        return _with_identity(shared, self.rank, self.path, self.identity)


def _with_identity(shared: RankProgram, rank: int, path: Path, identity: tuple[np.ndarray, ...]) -> RankProgram:
    """``rank``'s program: ``shared``'s columns but its own groups and peers (``identity``, as :data:`_IDENTITY`)."""
    if shared.rank == rank:
        return shared
    columns = shared.columns._replace(**dict(zip(_IDENTITY, identity, strict=True)))
    return RankProgram(rank, path, columns, shared.name_list, shared.slot_names, shared.cpu_slots,
                       shared.missing_deps)  # fmt: skip


def _loaded_program(table: NodeTable, *, call: str, cpu_per_thread: bool, gpu_per_stream: bool) -> _Loaded:
    """One rank's program from its table (a top-level function: worker processes find it by import),
    whole the first time this process meets a program like it in this loading ``call``."""
    rank = table.rank if table.rank is not None else 0
    program = program_of(table, rank, cpu_per_thread=cpu_per_thread, gpu_per_stream=gpu_per_stream)
    columns = program.columns
    digest = hashlib.blake2b(digest_size=16)
    for name, column in zip(columns._fields, columns, strict=True):
        if name not in _IDENTITY:
            digest.update(np.ascontiguousarray(column).tobytes())
    digest.update(
        repr((program.name_list, program.slot_names, sorted(program.cpu_slots), program.missing_deps)).encode()
    )
    key = digest.digest()
    seen = _HANDED_BACK.setdefault(call, set())
    whole = key not in seen
    seen.add(key)
    identity = tuple(getattr(columns, name) for name in _IDENTITY)
    return _Loaded(rank, program.path, key, identity, program if whole else None)


def simulate_workload(
    workload: str | Path,
    system: SystemConfig,
    network: NetworkConfig,
    *,
    remote_memory: RemoteMemoryConfig | None = None,
    comm_groups_path: str | Path | None = None,
    compute_scale: float = 1.0,
    keep_intervals: bool = False,
    cpu_per_thread: bool = False,
    gpu_per_stream: bool = False,
    load_workers: int | None = None,
    network_model: NetworkModel = NetworkModel.CONGESTION_UNAWARE,
    by_classes: bool = True,
) -> SimResult:
    """Run ``PREFIX.{rank}.et`` (a prefix, a folder or one file) on ``system``/``network``, its
    messages crossing the network as ``network_model`` says (``by_classes``: see
    :func:`chakra.sim.engine.simulate`).

    Every rank the network has must have its file; groups come from ``comm_groups_path``, else
    ``PREFIX.comm_groups.json`` beside the files (:func:`open_simulated`).
    ``cpu_per_thread``/``gpu_per_stream``: see :func:`chakra.sim.program.program_of`; ``load_workers``:
    the processes that load the ranks (:func:`load_programs`).
    """
    opened = open_simulated(workload, comm_groups_path)
    check_network_covers(opened, network)
    programs = load_programs(opened, cpu_per_thread=cpu_per_thread, gpu_per_stream=gpu_per_stream, workers=load_workers)
    return simulate(
        programs,
        system,
        network,
        remote_memory=remote_memory,
        comm_groups=opened.comm_groups,
        comm_groups_path=opened.comm_groups_path,
        compute_scale=compute_scale,
        keep_intervals=keep_intervals,
        network_model=network_model,
        by_classes=by_classes,
    )
