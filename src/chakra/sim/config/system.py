"""ASTRA-sim's system JSON file (``reference/astra-sim.md`` §4.1): read, typed, checked.

Values keep the file's units: delays ns, ``local-mem-bw`` GB/s, ``peak-perf`` TFLOPS.

Example:
    system = load_system("examples/astra/system.json", {"preferred-dataset-splits": 8})
    system.preferred_dataset_splits, system.algorithms("ALL_REDUCE", dims=1)
    # (8, ('ring',))
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from chakra.documents import parse_yaml, read_text
from chakra.errors import ChakraInputError, PathLike
from chakra.sim.config.overrides import check_override_keys
from chakra.sim.config.reading import ConfigSource, NonNegative, read_json_object

WHAT = "system configuration"

#: ``endpoint-delay`` when the system file does not give it (§4.1).
DEFAULT_ENDPOINT_DELAY_NS = 10.0
#: ``active-chunks-per-dimension`` when the system file does not give it (§4.1).
DEFAULT_ACTIVE_CHUNKS_PER_DIMENSION = 1

#: ``scheduling-policy`` values; ASTRA-sim compares the spelling exactly (§4.1).
SCHEDULING_POLICIES = ("LIFO", "FIFO", "EXPLICIT")
#: ``collective-optimization`` values; ASTRA-sim compares the spelling exactly (§4.1).
COLLECTIVE_OPTIMIZATIONS = ("baseline", "localBWAware")

#: Collective type (protobuf ``CollectiveCommType`` name) -> system key listing its per-dimension algorithms.
IMPLEMENTATION_KEYS = {
    "ALL_REDUCE": "all-reduce-implementation",
    "REDUCE_SCATTER": "reduce-scatter-implementation",
    "ALL_GATHER": "all-gather-implementation",
    "ALL_TO_ALL": "all-to-all-implementation",
}

#: Native algorithm names (§4.1); ``directN``/``oneDirectN`` carry a positive window N.
ALGORITHM_NAMES = (
    "ring",
    "oneRing",
    "direct",
    "directN",
    "oneDirect",
    "oneDirectN",
    "halvingDoubling",
    "oneHalvingDoubling",
    "doubleBinaryTree",
)
_ALGORITHM = re.compile(
    r"ring|oneRing|halvingDoubling|oneHalvingDoubling|doubleBinaryTree|direct([1-9]\d*)?|oneDirect([1-9]\d*)?"
)

#: Keys that have no usable default in ASTRA-sim (§4.1, §7): key -> (why it is needed, how to add it).
REQUIRED_KEYS = {
    "scheduling-policy": ("ASTRA-sim leaves the chunk scheduling policy uninitialised without it", '"LIFO"'),
    "preferred-dataset-splits": ("ASTRA-sim would divide by zero when it splits a collective into chunks", "4"),
}
#: ``collective-optimization`` left out: ASTRA-sim leaves it uninitialised, which only a native
#: all-reduce over several network dimensions reads (it stalls there); elsewhere both values plan alike.
NO_COLLECTIVE_OPTIMIZATION = None
#: Collective type -> the system key naming a custom algorithm for it: a list of one path prefix of
#: per-rank Chakra ETs (``PREFIX.{position}.et``), ASTRA-sim's ``CustomAlgorithm``.
CUSTOM_IMPLEMENTATION_KEYS = {name: key + "-custom" for name, key in IMPLEMENTATION_KEYS.items()}

#: Every system key ASTRA-sim reads or documents (§4.1); others are kept but reported as unknown.
KNOWN_SYSTEM_KEYS = frozenset(
    {
        *REQUIRED_KEYS,
        "collective-optimization",
        *IMPLEMENTATION_KEYS.values(),
        *CUSTOM_IMPLEMENTATION_KEYS.values(),
        "per-node-custom-implementation",
        "active-chunks-per-dimension",
        "endpoint-delay",
        "local-mem-bw",
        "peak-perf",
        "roofline-enabled",
        "replay-only",
        "trace-enabled",
        "track-local-mem",
        "local-mem-trace-filename",
        "model-shared-bus",
        "L",
        "o",
        "g",
        "G",
        "local-reduction-delay",
        # documented upstream but not parsed (fixed to FIFO / ascending)
        "intra-dimension-scheduling",
        "inter-dimension-scheduling",
        "boost-mode",
    }
)

#: Keys of this package, not ASTRA-sim's (ASTRA-sim ignores keys it does not read, so a file with them
#: still runs there). ``chakra-astra-compat: 1``: treat the collective types ASTRA-sim does not
#: simulate as ASTRA-sim does (BROADCAST replays its ``duration_micros`` on the rank alone; REDUCE,
#: GATHER, SCATTER, REDUCE_SCATTER_BLOCK and BARRIER are refused) instead of modelling them.
ASTRA_COMPAT_KEY = "chakra-astra-compat"
CHAKRA_SYSTEM_KEYS = frozenset({ASTRA_COMPAT_KEY})

#: A 0-or-1 switch: ASTRA-sim tests ``value != 0``; true and false read as 1 and 0
#: (:mod:`chakra.sim.config.reading`).
Flag = Literal[0, 1]
#: An ``*-implementation`` list: one algorithm name per network dimension.
Algorithms = Annotated[list[str], msgspec.Meta(min_length=1, examples=[["ring"]])]


#: The most chunks a collective may be split into, and chunks a dimension may run at once. Each chunk
#: is simulated as a stream of its own, so a count beyond this is a typo that would run for hours;
#: ASTRA-sim's example systems use 1 to 64.
MAX_CHUNKS = 1 << 16
ChunkCount = Annotated[int, msgspec.Meta(gt=0, le=MAX_CHUNKS)]


class SystemFile(msgspec.Struct, rename="kebab", kw_only=True):
    """The keys of a system file the simulator reads, typed as ASTRA-sim's JSON reader takes them."""

    scheduling_policy: str
    collective_optimization: str | None = NO_COLLECTIVE_OPTIMIZATION
    preferred_dataset_splits: Annotated[
        ChunkCount, msgspec.Meta(description="the chunks a collective is split into, each simulated on its own")
    ]
    active_chunks_per_dimension: Annotated[
        ChunkCount, msgspec.Meta(description="with no active chunk no collective would progress")
    ] = DEFAULT_ACTIVE_CHUNKS_PER_DIMENSION
    endpoint_delay: Annotated[NonNegative, msgspec.Meta(description="it is a delay in ns")] = DEFAULT_ENDPOINT_DELAY_NS
    local_mem_bw: Annotated[NonNegative, msgspec.Meta(description="it is a bandwidth in GB/s")] = 0.0
    peak_perf: Annotated[NonNegative, msgspec.Meta(description="it is a compute rate in TFLOPS")] = 0.0
    roofline_enabled: Flag = 0
    replay_only: Flag = 0
    trace_enabled: Flag = 0
    chakra_astra_compat: Flag = 0
    all_reduce_implementation: Algorithms | None = None
    reduce_scatter_implementation: Algorithms | None = None
    all_gather_implementation: Algorithms | None = None
    all_to_all_implementation: Algorithms | None = None
    all_reduce_implementation_custom: list[str] | None = None
    reduce_scatter_implementation_custom: list[str] | None = None
    all_gather_implementation_custom: list[str] | None = None
    all_to_all_implementation_custom: list[str] | None = None
    per_node_custom_implementation: str | None = None

    def custom_implementations(self) -> dict[str, list[str]]:
        """Collective type name -> its custom algorithm list as written, for the types the file gives one."""
        lists = {
            "ALL_REDUCE": self.all_reduce_implementation_custom,
            "REDUCE_SCATTER": self.reduce_scatter_implementation_custom,
            "ALL_GATHER": self.all_gather_implementation_custom,
            "ALL_TO_ALL": self.all_to_all_implementation_custom,
        }
        return {name: names for name, names in lists.items() if names is not None}

    def implementations(self) -> dict[str, list[str]]:
        """Collective type name -> its algorithm list, for the types the file gives one."""
        lists = {
            "ALL_REDUCE": self.all_reduce_implementation,
            "REDUCE_SCATTER": self.reduce_scatter_implementation,
            "ALL_GATHER": self.all_gather_implementation,
            "ALL_TO_ALL": self.all_to_all_implementation,
        }
        return {name: names for name, names in lists.items() if names is not None}


@dataclass(frozen=True)
class SystemConfig:
    """An ASTRA-sim system file (§4.1), values in the file's units (ns, GB/s, TFLOPS).

    ``implementations`` maps collective types present in the file (``"ALL_REDUCE"``, ...) to their
    per-dimension algorithm names as written; use :meth:`algorithms` to get one with ASTRA-sim's checks.
    ``raw`` holds every key as read (overrides applied); ``unknown_keys`` those neither ASTRA-sim nor
    this package reads. ``astra_compat`` (``chakra-astra-compat``): see :data:`ASTRA_COMPAT_KEY`.
    """

    scheduling_policy: str
    collective_optimization: str | None
    implementations: dict[str, tuple[str, ...]]
    preferred_dataset_splits: int
    active_chunks_per_dimension: int = DEFAULT_ACTIVE_CHUNKS_PER_DIMENSION
    endpoint_delay_ns: float = DEFAULT_ENDPOINT_DELAY_NS
    local_mem_bw_gbps: float = 0.0
    peak_perf_tflops: float = 0.0
    roofline_enabled: bool = False
    replay_only: bool = False
    trace_enabled: bool = False
    astra_compat: bool = False
    #: collective type name -> the path prefix of its custom algorithm's per-rank ETs, resolved
    #: (:func:`resolve_custom_prefix`); a custom algorithm takes precedence over the type's native list
    custom_implementations: dict[str, Path] = field(default_factory=dict)
    #: workload node id -> the custom algorithm its collective runs, whatever its type
    #: (``per-node-custom-implementation``: a YAML map; it takes precedence over every other setting)
    per_node_custom: dict[int, Path] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    unknown_keys: tuple[str, ...] = ()

    def algorithms(self, comm_type_name: str, dims: int) -> tuple[str, ...]:
        """Per-dimension algorithm names for collective type ``comm_type_name`` (``"ALL_REDUCE"``, ...).

        Raises when the file has no list for that type, or a longer list than the network has
        dimensions (ASTRA-sim asserts); a shorter list leaves the higher dimensions unused.
        """
        key = IMPLEMENTATION_KEYS.get(comm_type_name)
        if key is None:
            raise ChakraInputError(
                f"ASTRA-sim has no algorithm setting for {comm_type_name} collectives",
                path=self.path,
                hint=f"only {', '.join(IMPLEMENTATION_KEYS)} collectives choose algorithms",
            )
        algorithms = self.implementations.get(comm_type_name)
        if algorithms is None:
            example = json.dumps(["ring"] * max(dims, 1))
            raise ChakraInputError(
                f"the workload has {comm_type_name} collectives but the system configuration has no {key!r}",
                path=self.path,
                hint=f'add "{key}": {example} (one algorithm per network dimension)',
            )
        if len(algorithms) > dims:
            raise ChakraInputError(
                f"{key} lists {len(algorithms)} algorithms {list(algorithms)} "
                f"but the network has {dims} dimension{'s' if dims != 1 else ''}",
                path=self.path,
                hint="give at most one algorithm per network dimension (ASTRA-sim asserts this)",
            )
        return algorithms

    def scaled_endpoint_delay_ns(self, injection_scale: float) -> float:
        """Endpoint delay in ns under ``--injection-scale``: ASTRA-sim scales it only when the file gives it (§1)."""
        if "endpoint-delay" in self.raw:
            return self.endpoint_delay_ns * injection_scale
        return self.endpoint_delay_ns


def load_system(path: PathLike, overrides: Mapping[str, Any] | None = None) -> SystemConfig:
    """Read and check an ASTRA-sim system JSON file (§4.1), with ``overrides`` (key -> value) applied first."""
    path = Path(path)
    raw = read_json_object(path, WHAT)
    overrides = dict(overrides or {})
    required = {key: (why, f'add "{key}": {example}') for key, (why, example) in REQUIRED_KEYS.items()}
    source = ConfigSource(path, WHAT, frozenset(overrides), required)
    check_override_keys(source, overrides, KNOWN_SYSTEM_KEYS | CHAKRA_SYSTEM_KEYS)
    raw.update(overrides)
    typed = source.decode(raw, SystemFile)

    if typed.roofline_enabled:
        for key, value in (("peak-perf", typed.peak_perf), ("local-mem-bw", typed.local_mem_bw)):
            if value == 0:
                raise source.error(
                    f"roofline-enabled is 1 but {key} is {'absent' if key not in raw else 0}: "
                    "the roofline would make every compute node take forever",
                    hint=f'give "{key}" (e.g. "peak-perf": 900, "local-mem-bw": 1600 as in ASTRA-sim\'s examples) '
                    'or set "roofline-enabled": 0',
                )
    if raw.get("model-shared-bus") in (1, 1.0, True):
        # ASTRA-sim then times every packet's crossing of the NPU-memory bus with its LogGP model
        raise source.error(
            "model-shared-bus 1 (ASTRA-sim's shared NPU-memory bus, timed by its LogGP model with L, o, g and G) "
            "is not modelled by this simulator yet",
            hint="use \"model-shared-bus\": 0 (ASTRA-sim's default, and every example system's)",
        )
    implementations = {
        name: _known_algorithms(source, IMPLEMENTATION_KEYS[name], names)
        for name, names in typed.implementations().items()
    }
    return SystemConfig(
        scheduling_policy=source.choice("scheduling-policy", typed.scheduling_policy, SCHEDULING_POLICIES),
        collective_optimization=(
            source.choice("collective-optimization", typed.collective_optimization, COLLECTIVE_OPTIMIZATIONS)
            if typed.collective_optimization is not None
            else NO_COLLECTIVE_OPTIMIZATION
        ),
        implementations=implementations,
        preferred_dataset_splits=typed.preferred_dataset_splits,
        active_chunks_per_dimension=typed.active_chunks_per_dimension,
        endpoint_delay_ns=typed.endpoint_delay,
        local_mem_bw_gbps=typed.local_mem_bw,
        peak_perf_tflops=typed.peak_perf,
        roofline_enabled=bool(typed.roofline_enabled),
        replay_only=bool(typed.replay_only),
        trace_enabled=bool(typed.trace_enabled),
        astra_compat=bool(typed.chakra_astra_compat),
        custom_implementations={
            name: resolve_custom_prefix(source, CUSTOM_IMPLEMENTATION_KEYS[name], prefixes, path)
            for name, prefixes in typed.custom_implementations().items()
        },
        per_node_custom=(
            read_per_node_custom(source, typed.per_node_custom_implementation, path)
            if typed.per_node_custom_implementation is not None
            else {}
        ),
        raw=raw,
        path=path,
        unknown_keys=tuple(key for key in raw if key not in KNOWN_SYSTEM_KEYS | CHAKRA_SYSTEM_KEYS),
    )


def _known_algorithms(source: ConfigSource, key: str, names: list[str]) -> tuple[str, ...]:
    """``names`` when every one is an algorithm ASTRA-sim knows, else the error (with the nearest name)."""
    for index, name in enumerate(names):
        if not _ALGORITHM.fullmatch(name):
            close = difflib.get_close_matches(name, ALGORITHM_NAMES, n=1)
            suggestion = f'; did you mean "{close[0]}"?' if close else ""
            raise source.error(
                f"{source.describe(key, name, index)} is not an algorithm ASTRA-sim knows{suggestion}",
                hint=f"use {', '.join(ALGORITHM_NAMES)} (N = a positive window, e.g. direct8)",
            )
    return tuple(names)


def resolve_custom_prefix(source: ConfigSource, key: str, prefixes: list[str], system_path: Path) -> Path:
    """The path prefix of a custom algorithm's per-rank ETs: the list's one entry (ASTRA-sim throws
    "There should be 1 Chakra ET only" otherwise). ASTRA-sim reads a relative prefix from its working
    directory; where that has no rank-0 file the folders above the system file are tried in turn
    (ASTRA-sim's example names its prefix from the repository's root), and the working directory's
    path is kept when none has it (the run then says the file is missing, as ASTRA-sim does).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "algo").mkdir(); (root / "algo" / "ring.0.et").write_bytes(b"")
    0
    >>> (root / "system").mkdir()
    >>> system = root / "system" / "s.json"
    >>> where = ConfigSource(system, WHAT, frozenset(), {})
    >>> resolve_custom_prefix(where, "all-reduce-implementation-custom", ["algo/ring"], system) == root / "algo/ring"
    True
    """
    if len(prefixes) != 1:
        raise source.error(
            f"{key} lists {len(prefixes)} entries; ASTRA-sim takes exactly one path prefix of per-rank ETs "
            '(it throws "There should be 1 Chakra ET only")',
            hint=f'give "{key}": ["path/to/algorithm"] for files path/to/algorithm.0.et, .1.et, ...',
        )
    prefix = Path(prefixes[0])
    if prefix.is_absolute():
        return prefix
    for base in (Path.cwd(), *system_path.resolve().parents):
        if (base / prefix).with_name(prefix.name + ".0.et").is_file():
            return base / prefix
    return Path.cwd() / prefix


def read_per_node_custom(source: ConfigSource, name: str, system_path: Path) -> dict[int, Path]:
    """``per-node-custom-implementation``: a YAML file mapping workload node ids to custom algorithm
    prefixes, found as ASTRA-sim finds it (its working directory, else the folders above the system
    file); each prefix resolved as :func:`resolve_custom_prefix` does, also from the YAML's folder."""
    key = "per-node-custom-implementation"
    relative = Path(name)
    candidates = (
        [relative]
        if relative.is_absolute()
        else [base / relative for base in (Path.cwd(), *system_path.resolve().parents)]
    )
    found = next((path for path in candidates if path.is_file()), None)
    if found is None:
        raise source.error(
            f"{key} names {name!r}, which is not a file (ASTRA-sim reads it from its working directory)",
            hint="give the path of a YAML map from workload node ids to custom algorithm prefixes",
        )
    document = parse_yaml(read_text(found, "per-node custom implementation file"), found, "per-node custom "
                          "implementation file", hint="write node_id: path/to/algorithm, one per line")  # fmt: skip
    if not isinstance(document, dict) or not all(isinstance(node, int) for node in document):
        raise ChakraInputError(
            "a per-node custom implementation file must map integer node ids to path prefixes "
            "(ASTRA-sim throws on anything else)",
            path=found,
            hint="write node_id: path/to/algorithm, one per line",
        )
    where = ConfigSource(found, "per-node custom implementation file", frozenset(), {})
    return {
        node: resolve_custom_prefix(where, f"node {node}", [str(prefix)], found) for node, prefix in document.items()
    }
