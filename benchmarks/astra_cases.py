"""Workloads and configurations run by both ``chakra simulate`` and ASTRA-sim's own binary, and the
comparison of their per-rank cycles. Used by ``benchmarks/sim_vs_astra.py`` (the large sweep) and
``tests/test_sim_vs_astra.py`` (a sample of it).

A :class:`Case` is one collective per rank (optionally behind a compute node that makes some ranks
arrive late, optionally on a subgroup), on a network of one to three dimensions, with one
collective algorithm and optimisation. :func:`run_case` writes it into a folder, runs both
simulators and returns both figures per rank.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from chakra.groups import CommGroups
from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, COMP_NODE, CollectiveCommType
from chakra.sim.astra import CRASHED_AT_EXIT, AstraRank, AstraRun, run_astra_sim
from chakra.sim.choices import NetworkModel
from chakra.sim.config import load_network, load_system
from chakra.sim.config.system import ASTRA_COMPAT_KEY
from chakra.sim.run import simulate_workload
from chakra.trace import new_node
from chakra.workload_writer import write_workload

#: ASTRA-sim's binaries (``../shared/astra-sim``, beside the checkout).
ASTRA_BIN = Path(__file__).resolve().parents[2] / "shared" / "astra-sim" / "bin"
CONGESTION_UNAWARE = "AstraSim_Analytical_Congestion_Unaware"
CONGESTION_AWARE = "AstraSim_Analytical_Congestion_Aware"
#: Link figures of every case's network: ASTRA-sim's example values (GB/s, ns).
BANDWIDTH_GBPS, LATENCY_NS = 50.0, 500.0
#: The system settings every case shares (ASTRA-sim's example system, examples/astra/system.json).
BASE_SYSTEM = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "preferred-dataset-splits": 4,
    "local-mem-bw": 1600,
    "boost-mode": 0,
    "roofline-enabled": 0,
    "peak-perf": 900,
}
#: How often a run that crashed at exit with lines missing is tried (run_workload).
ABORT_ATTEMPTS = 3
#: The comm group id of a case's subgroup.
SUBGROUP_ID = 1
KIB = 1 << 10


@dataclass(frozen=True)
class Case:
    """One comparison: ``comm_type`` of ``size_bytes`` on every rank (or on ``group``) of a network
    of ``topology``/``npus`` per dimension, with ``algorithm`` on every dimension; ``late_us`` gives
    ranks a compute node of that many µs before their collective."""

    comm_type: str
    size_bytes: int
    topology: tuple[str, ...]
    npus: tuple[int, ...]
    algorithm: str = "ring"
    optimization: str = "localBWAware"
    active_chunks: int = 1
    group: tuple[int, ...] | None = None
    late_us: dict[int, int] = field(default_factory=dict)
    duration_us: int = 0  # of the collective node (ASTRA-sim replays a BROADCAST for it)
    astra_compat: bool = False  # chakra-astra-compat in the system JSON (ASTRA-sim ignores the key)

    @property
    def name(self) -> str:
        dims = "x".join(f"{t}{n}" for t, n in zip(self.topology, self.npus, strict=True))
        parts = [self.comm_type, f"{self.size_bytes // KIB}KiB", dims, self.algorithm, self.optimization,
                 f"a{self.active_chunks}"]  # fmt: skip
        if self.group is not None:
            parts.append("g" + "-".join(map(str, self.group)))
        if self.late_us:
            parts.append("late" + "-".join(f"{r}:{us}" for r, us in sorted(self.late_us.items())))
        if self.astra_compat:
            parts.append(f"compat{self.duration_us}us")
        return ".".join(parts)

    @property
    def world(self) -> int:
        total = 1
        for n in self.npus:
            total *= n
        return total


def write_case(case: Case, folder: Path) -> tuple[Path, Path, Path]:
    """The case's workload prefix, system JSON and network YAML, written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    members = case.group if case.group is not None else tuple(range(case.world))
    per_rank = {}
    for rank in range(case.world):
        late = case.late_us.get(rank, 0)
        nodes = [new_node(0, "before", COMP_NODE, duration_us=late, is_cpu_op=False)]
        if rank in members:
            pg = str(SUBGROUP_ID) if case.group is not None else "0"
            nodes.append(
                new_node(1, case.comm_type.lower(), COMM_COLL_NODE, data_deps=[0], is_cpu_op=False,
                         duration_us=case.duration_us,
                         comm_type=CollectiveCommType.Value(case.comm_type), comm_size=case.size_bytes, pg_name=pg)
            )  # fmt: skip
        per_rank[rank] = nodes
    prefix = folder / "case"
    write_workload(prefix, per_rank)
    if case.group is not None:
        CommGroups({SUBGROUP_ID: case.group}).write(folder / "case.comm_groups.json")
    dims = len(case.npus)
    system = {
        **BASE_SYSTEM,
        "active-chunks-per-dimension": case.active_chunks,
        "collective-optimization": case.optimization,
        **({ASTRA_COMPAT_KEY: 1} if case.astra_compat else {}),
        **{f"{kind}-implementation": [case.algorithm] * dims for kind in ("all-reduce", "all-gather", "reduce-scatter",
                                                                         "all-to-all")},
    }  # fmt: skip
    system_path = folder / "system.json"
    system_path.write_text(json.dumps(system, indent=1))
    network_path = folder / "network.yml"
    network_path.write_text(
        f"topology: [ {', '.join(case.topology)} ]\n"
        f"npus_count: [ {', '.join(map(str, case.npus))} ]\n"
        f"bandwidth: [ {', '.join([str(BANDWIDTH_GBPS)] * dims)} ]\n"
        f"latency: [ {', '.join([str(LATENCY_NS)] * dims)} ]\n"
    )
    return prefix, system_path, network_path


@dataclass
class Outcome:
    """Both simulators' figures of one case, per rank; ``error`` when ours refused it."""

    case: Case
    ours: dict[int, AstraRank]
    theirs: AstraRun
    error: str | None = None

    @property
    def both_refuse(self) -> bool:
        """Ours refused the case and ASTRA-sim did not run every rank to its end (it exits or crashes,
        or its events run out with ranks waiting: a deadlock, exit status 0)."""
        return self.error is not None and (self.theirs.returncode != 0 or len(self.theirs.ranks) < self.case.world)

    @property
    def exact(self) -> bool:
        return (self.error is None and self.ours == self.theirs.ranks) or self.both_refuse

    def worst_rank(self) -> tuple[int, AstraRank | None, AstraRank | None]:
        """The rank whose finish differs most (ours vs ASTRA-sim's)."""
        ranks = sorted(set(self.ours) | set(self.theirs.ranks))

        def gap(rank: int) -> int:
            a, b = self.ours.get(rank), self.theirs.ranks.get(rank)
            return abs((a.finish_ns if a else 0) - (b.finish_ns if b else 0))

        if not ranks:
            return -1, None, None
        rank = max(ranks, key=gap)
        return rank, self.ours.get(rank), self.theirs.ranks.get(rank)


def run_case(
    case: Case, folder: Path, binary: Path = ASTRA_BIN / CONGESTION_UNAWARE, network_model: str = "congestion-unaware"
) -> Outcome:
    """Write ``case`` into ``folder`` and run it in both simulators (ours with ``network_model``)."""
    prefix, system_path, network_path = write_case(case, folder)
    return run_workload(case, prefix, system_path, network_path, None, binary, network_model)


def run_workload(
    case: Case,
    prefix: Path,
    system_path: Path,
    network_path: Path,
    comm_groups: Path | None,
    binary: Path = ASTRA_BIN / CONGESTION_UNAWARE,
    network_model: str = "congestion-unaware",
) -> Outcome:
    """Run the workload ``prefix`` (with ``case``'s configuration files) in both simulators.

    Where ranks are in several groups, ASTRA-sim may crash at exit (a double free in its
    communicator-group teardown, :data:`chakra.sim.astra.CRASHED_AT_EXIT`) after printing its
    results, and its logger may lose lines then: such a run is repeated (up to
    :data:`ABORT_ATTEMPTS` runs) until every rank's line is there.
    """
    from chakra.errors import ChakraError

    for _ in range(ABORT_ATTEMPTS):
        theirs = run_astra_sim(binary, prefix, system_path, network_path, comm_groups=comm_groups)
        if theirs.returncode not in CRASHED_AT_EXIT or len(theirs.ranks) == case.world:
            break
    try:
        result = simulate_workload(
            prefix,
            load_system(system_path),
            load_network(network_path),
            comm_groups_path=comm_groups,
            network_model=NetworkModel(network_model),
        )
    except ChakraError as error:
        return Outcome(case, {}, theirs, str(error))
    ours = {rank: AstraRank(s.finish_ns, s.astra_exposed_comm_ns) for rank, s in result.ranks.items()}
    return Outcome(case, ours, theirs)


@contextmanager
def links_that_never_queue() -> Iterator[None]:
    """Within it, the congestion-aware model's links carry every message at once, in the
    congestion-unaware model's time (``trunc(h·L + m/B)`` over the dimension where the NPUs differ):
    its collectives then run their phases, queues and state machines message by message with no
    contention, which must give the congestion-unaware model's cycles. A check of the message-level
    machinery apart from the links, not a model users choose."""
    from chakra.sim import links
    from chakra.sim.network import message_delay_ns

    def send(self, now_ns: int, src: int, dst: int, size_bytes: int, delivered: Callable[[int], None]) -> None:
        self.schedule(now_ns + message_delay_ns(self.network, src, dst, size_bytes), delivered)

    queued = links.LinkNetwork.send
    links.LinkNetwork.send = send  # type: ignore[method-assign]
    try:
        yield
    finally:
        links.LinkNetwork.send = queued  # type: ignore[method-assign]


def finish_by_model(case: Case, folder: Path) -> dict[NetworkModel, dict[int, int] | str]:
    """Every rank's finish (ns) of ``case`` in each of our network models, or why it was refused."""
    from chakra.errors import ChakraError

    prefix, system_path, network_path = write_case(case, folder)
    finish: dict[NetworkModel, dict[int, int] | str] = {}
    for model in NetworkModel:
        try:
            result = simulate_workload(
                prefix, load_system(system_path), load_network(network_path), network_model=model
            )
            finish[model] = {rank: s.finish_ns for rank, s in result.ranks.items()}
        except ChakraError as error:
            finish[model] = str(error)
    return finish
