"""ASTRA-sim configuration files: system JSON, network YAML, remote memory JSON (``reference/astra-sim.md`` §4).

Each loader reads one file, applies optional overrides (``--set key=value``, ASTRA-sim key spellings),
checks every value ASTRA-sim would crash on, hang on or silently misread, and returns a frozen
dataclass. Problems raise :class:`~chakra.errors.ChakraInputError` naming the file, the key and the
value (and the override when one supplied it), with a fix hint. Communicator group files are read by
:func:`chakra.trace.read_comm_groups`.

Units are those of the files: network bandwidth GB/s (converted GiB-based, §5.1), latencies and
delays ns, ``local-mem-bw`` GB/s, ``peak-perf`` TFLOPS, ``remote-mem-bw`` bytes/ns.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from chakra.errors import ChakraInputError, PathLike

# ---------------------------------------------------------------------------------------------
# Constants (reference/astra-sim.md)

#: Network link bandwidth GB/s -> bytes/ns: the analytical backend multiplies by 2**30 and divides
#: by 1e9 (§4.2, §5.1), i.e. it reads "GB" as GiB.
BYTES_PER_GIB = 2**30
NS_PER_S = 1e9

#: ``endpoint-delay`` when the system file does not give it (§4.1).
DEFAULT_ENDPOINT_DELAY_NS = 10.0
#: ``active-chunks-per-dimension`` when the system file does not give it (§4.1).
DEFAULT_ACTIVE_CHUNKS_PER_DIMENSION = 1

#: ``scheduling-policy`` values; ASTRA-sim compares the spelling exactly (§4.1).
SCHEDULING_POLICIES = ("LIFO", "FIFO", "EXPLICIT")
#: ``collective-optimization`` values; ASTRA-sim compares the spelling exactly (§4.1).
COLLECTIVE_OPTIMIZATIONS = ("baseline", "localBWAware")
#: Network ``topology`` names as ASTRA-sim writes them (§4.2).
TOPOLOGIES = ("Ring", "FullyConnected", "Switch")
#: Remote memory ``memory-type`` values (§4.3).
MEMORY_TYPES = ("NO_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "MEMORY_POOL")

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

#: Keys that have no usable default in ASTRA-sim (§4.1, §7): key -> (why it is needed, example value).
_REQUIRED_SYSTEM_KEYS = {
    "scheduling-policy": ("ASTRA-sim leaves the chunk scheduling policy uninitialised without it", '"LIFO"'),
    "collective-optimization": ("ASTRA-sim has no default multi-dimensional all-reduce plan", '"baseline"'),
    "preferred-dataset-splits": (
        "ASTRA-sim would divide by zero when it splits a collective into chunks",
        "4",
    ),
}

#: Every system key ASTRA-sim reads or documents (§4.1); others are kept but reported as unknown.
KNOWN_SYSTEM_KEYS = frozenset(
    {
        *_REQUIRED_SYSTEM_KEYS,
        *IMPLEMENTATION_KEYS.values(),
        *(key + "-custom" for key in IMPLEMENTATION_KEYS.values()),
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

#: The four network keys, each a per-dimension list (§4.2).
NETWORK_KEYS = ("topology", "npus_count", "bandwidth", "latency")
#: Keys of the older network format that the analytical backend no longer reads (§4.2).
_OLD_NETWORK_KEYS = ("dimensions-count", "units-count", "links-count")

_NETWORK_EXAMPLE = "topology: [ Ring ], npus_count: [ 8 ], bandwidth: [ 50.0 ], latency: [ 500.0 ]"

# A number written as text: PyYAML reads "1e9" (no dot) as a string, ASTRA-sim's yaml-cpp as a number.
_NUMERIC_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class NetworkConfig:
    """An analytical network: per dimension its topology, NPU count, link bandwidth (GB/s) and latency (ns)."""

    topology: tuple[str, ...]
    npus_count: tuple[int, ...]
    bandwidth_gbps: tuple[float, ...]
    latency_ns: tuple[float, ...]
    path: Path | None = None

    def __post_init__(self) -> None:
        lengths = {len(self.topology), len(self.npus_count), len(self.bandwidth_gbps), len(self.latency_ns)}
        if len(lengths) != 1:
            raise ValueError("NetworkConfig needs one topology, npus_count, bandwidth and latency per dimension")

    @property
    def num_npus(self) -> int:
        """Total NPUs: the product of ``npus_count`` (how ASTRA-sim counts them, §1)."""
        return math.prod(self.npus_count)

    @property
    def dims(self) -> int:
        """Number of network dimensions."""
        return len(self.topology)

    def bandwidth_bytes_per_ns(self, dim: int) -> float:
        """Link bandwidth of dimension ``dim`` in bytes/ns, converted as ASTRA-sim does (GiB-based, §5.1)."""
        # same operation order as the C++ (bw * 2^30 / 1e9) so results agree to the last bit
        return self.bandwidth_gbps[dim] * BYTES_PER_GIB / NS_PER_S

    def coordinates(self, npu: int) -> tuple[int, ...]:
        """Per-dimension coordinates of NPU ``npu``; dimension 0 varies fastest (§4.2)."""
        if not 0 <= npu < self.num_npus:
            raise ChakraInputError(
                f"NPU {npu} is outside the network's {self.num_npus} NPUs",
                path=self.path,
                hint="make npus_count multiply to the number of ranks in the workload",
            )
        coords = []
        for count in self.npus_count:
            npu, coord = divmod(npu, count)
            coords.append(coord)
        return tuple(coords)


@dataclass(frozen=True)
class SystemConfig:
    """An ASTRA-sim system file (§4.1), values in the file's units (ns, GB/s, TFLOPS).

    ``implementations`` maps collective types present in the file (``"ALL_REDUCE"``, ...) to their
    per-dimension algorithm names as written; use :meth:`algorithms` to get one with ASTRA-sim's checks.
    ``raw`` holds every key as read (overrides applied); ``unknown_keys`` those ASTRA-sim does not read.
    """

    scheduling_policy: str
    collective_optimization: str
    implementations: dict[str, tuple[str, ...]]
    preferred_dataset_splits: int
    active_chunks_per_dimension: int = DEFAULT_ACTIVE_CHUNKS_PER_DIMENSION
    endpoint_delay_ns: float = DEFAULT_ENDPOINT_DELAY_NS
    local_mem_bw_gbps: float = 0.0
    peak_perf_tflops: float = 0.0
    roofline_enabled: bool = False
    replay_only: bool = False
    trace_enabled: bool = False
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


@dataclass(frozen=True)
class RemoteMemoryConfig:
    """An ASTRA-sim remote memory file (§4.3): latency in ns, bandwidth in bytes/ns."""

    memory_type: str
    latency_ns: float = 0.0
    bandwidth_bytes_per_ns: float = 0.0
    num_nodes: int | None = None
    npus_per_node: int | None = None
    path: Path | None = None


# ---------------------------------------------------------------------------------------------
# Reading files


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ChakraInputError(
            f"no such {what} file", path=path, hint=f"pass the path of an existing {what} file"
        ) from None
    except IsADirectoryError:
        raise ChakraInputError(f"is a directory, not a {what} file", path=path) from None
    except OSError as exc:
        raise ChakraInputError(f"cannot read {what} file: {exc.strerror}", path=path) from None
    except UnicodeDecodeError as exc:
        raise ChakraInputError(f"{what} file is not UTF-8 text (byte {exc.start})", path=path) from None


def _read_json_object(path: Path, what: str) -> dict[str, Any]:
    text = _read_text(path, what)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ChakraInputError(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            path=path,
            hint="ASTRA-sim reads strict JSON: keys in double quotes, no comments, no trailing commas",
        ) from None
    if not isinstance(document, dict):
        raise ChakraInputError(
            f"{what} must be a JSON object of key -> value, not {type(document).__name__}",
            path=path,
            hint='write { "key": value, ... }',
        )
    return document


def _read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    text = _read_text(path, what)
    try:
        document = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "syntax error"
        raise ChakraInputError(
            f"{what} is not valid YAML: {problem}{where}",
            path=path,
            hint=f"write one list per key, e.g. {_NETWORK_EXAMPLE}",
        ) from None
    except yaml.YAMLError as exc:
        raise ChakraInputError(f"{what} is not valid YAML: {exc}", path=path) from None
    if not isinstance(document, dict):
        found = "an empty file" if document is None else f"a {type(document).__name__}"
        raise ChakraInputError(
            f"{what} must be a YAML mapping of key -> list, found {found}",
            path=path,
            hint=f"write {_NETWORK_EXAMPLE}",
        )
    return document


# ---------------------------------------------------------------------------------------------
# Checking values


@dataclass(frozen=True)
class _Origin:
    """Where values come from: the file, and which keys an override replaced (named in errors)."""

    path: Path
    overridden: frozenset[str] = frozenset()
    # YAML scalars such as "1e9" or a quoted "50" are numbers to ASTRA-sim's yaml-cpp, not to PyYAML
    numbers_as_text: bool = False

    def describe(self, key: str, value: Any, index: int | None = None) -> str:
        label = key if index is None else f"{key}[{index}] (dimension {index})"
        source = " (set by override)" if key in self.overridden else ""
        return f"{label} = {value!r}{source}"

    def error(self, message: str, hint: str | None = None) -> ChakraInputError:
        return ChakraInputError(message, path=self.path, hint=hint)


def _real(origin: _Origin, key: str, value: Any, index: int | None = None) -> float:
    """A finite number (bools refused: JSON true/false are not numbers to ASTRA-sim)."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    is_numeric_text = origin.numbers_as_text and isinstance(value, str) and _NUMERIC_TEXT.fullmatch(value.strip())
    number = float(value) if is_number or is_numeric_text else None
    if number is None or not math.isfinite(number):
        raise origin.error(f"{origin.describe(key, value, index)} is not a finite number", hint="write a plain number")
    return number


def _integer(origin: _Origin, key: str, value: Any, index: int | None = None) -> int:
    """A whole number (``4`` or ``4.0``); a fraction would be truncated silently by ASTRA-sim."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number = _real(origin, key, value, index)
    if not number.is_integer():
        raise origin.error(f"{origin.describe(key, value, index)} is not a whole number", hint="write an integer")
    return int(number)


def _at_least(origin: _Origin, key: str, value: Any, number: float, minimum: float, *, strict: bool, why: str) -> None:
    if number < minimum or (strict and number == minimum):
        relation = ">" if strict else ">="
        raise origin.error(
            f"{origin.describe(key, value)} must be {relation} {minimum:g}: {why}",
            hint=f'write "{key}": a number {relation} {minimum:g}',
        )


def _choice(origin: _Origin, key: str, value: Any, allowed: tuple[str, ...]) -> str:
    if isinstance(value, str) and value in allowed:
        return value
    hint = f"use one of {', '.join(allowed)} (ASTRA-sim compares the spelling exactly)"
    if isinstance(value, str):
        same_but_case = [name for name in allowed if name.lower() == value.lower()]
        if same_but_case:
            hint = f'write "{same_but_case[0]}" (ASTRA-sim compares the spelling exactly)'
    raise origin.error(f"{origin.describe(key, value)} is not one of {', '.join(allowed)}", hint=hint)


def _flag(origin: _Origin, key: str, value: Any) -> bool:
    # ASTRA-sim tests `value != 0`; JSON true/false are not numbers there, so only 0 and 1 are safe
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)
    raise origin.error(f"{origin.describe(key, value)} is not 0 or 1", hint=f'write "{key}": 0 or 1')


def _algorithm_list(origin: _Origin, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise origin.error(
            f"{origin.describe(key, value)} is not a non-empty list of algorithm names",
            hint=f'write "{key}": ["ring"] with one algorithm per network dimension',
        )
    for index, name in enumerate(value):
        if not (isinstance(name, str) and _ALGORITHM.fullmatch(name)):
            close = difflib.get_close_matches(str(name), ALGORITHM_NAMES, n=1)
            suggestion = f'; did you mean "{close[0]}"?' if close else ""
            raise origin.error(
                f"{key}[{index}] = {name!r}{' (set by override)' if key in origin.overridden else ''} "
                f"is not an algorithm ASTRA-sim knows{suggestion}",
                hint=f"use {', '.join(ALGORITHM_NAMES)} (N = a positive window, e.g. direct8)",
            )
    return tuple(value)


def _check_override_keys(
    origin: _Origin, overrides: Mapping[str, Any], known: frozenset[str] | tuple[str, ...]
) -> None:
    # a mistyped key in a file is tolerated (ASTRA-sim ignores it), but one typed on the command line
    # right now would silently do nothing, so refuse it
    for key in overrides:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            raise origin.error(
                f"override {key!r} is not a key ASTRA-sim reads",
                hint=f'did you mean "{close[0]}"?' if close else "use the key spelling of the configuration file",
            )


# ---------------------------------------------------------------------------------------------
# System


def load_system(path: PathLike, overrides: Mapping[str, Any] | None = None) -> SystemConfig:
    """Read and check an ASTRA-sim system JSON file (§4.1), with ``overrides`` (key -> value) applied first."""
    path = Path(path)
    raw = _read_json_object(path, "system configuration")
    overrides = dict(overrides or {})
    origin = _Origin(path, frozenset(overrides))
    _check_override_keys(origin, overrides, KNOWN_SYSTEM_KEYS)
    raw.update(overrides)

    for key, (why, example) in _REQUIRED_SYSTEM_KEYS.items():
        if key not in raw:
            raise origin.error(f"system configuration has no {key!r}: {why}", hint=f'add "{key}": {example}')

    policy = _choice(origin, "scheduling-policy", raw["scheduling-policy"], SCHEDULING_POLICIES)
    optimization = _choice(origin, "collective-optimization", raw["collective-optimization"], COLLECTIVE_OPTIMIZATIONS)

    key = "preferred-dataset-splits"
    splits = _integer(origin, key, raw[key])
    _at_least(
        origin, key, raw[key], splits, 0, strict=True, why="it is the number of chunks a collective is split into"
    )

    key = "active-chunks-per-dimension"
    active = _integer(origin, key, raw.get(key, DEFAULT_ACTIVE_CHUNKS_PER_DIMENSION))
    _at_least(
        origin, key, raw.get(key), active, 0, strict=True, why="with no active chunk no collective would progress"
    )

    key = "endpoint-delay"
    endpoint_delay_ns = _real(origin, key, raw.get(key, DEFAULT_ENDPOINT_DELAY_NS))
    _at_least(origin, key, raw.get(key), endpoint_delay_ns, 0, strict=False, why="it is a delay in ns")

    key = "local-mem-bw"
    local_mem_bw_gbps = _real(origin, key, raw.get(key, 0.0))
    _at_least(origin, key, raw.get(key), local_mem_bw_gbps, 0, strict=False, why="it is a bandwidth in GB/s")

    key = "peak-perf"
    peak_perf_tflops = _real(origin, key, raw.get(key, 0.0))
    _at_least(origin, key, raw.get(key), peak_perf_tflops, 0, strict=False, why="it is a compute rate in TFLOPS")

    roofline_enabled, replay_only, trace_enabled = (
        _flag(origin, flag, raw.get(flag, 0)) for flag in ("roofline-enabled", "replay-only", "trace-enabled")
    )
    if roofline_enabled:
        for key, value in (("peak-perf", peak_perf_tflops), ("local-mem-bw", local_mem_bw_gbps)):
            if value == 0:
                raise origin.error(
                    f"roofline-enabled is 1 but {key} is {'absent' if key not in raw else 0}: "
                    "the roofline would make every compute node take forever",
                    hint=f'give "{key}" (e.g. "peak-perf": 900, "local-mem-bw": 1600 as in ASTRA-sim\'s examples) '
                    'or set "roofline-enabled": 0',
                )

    implementations = {
        name: _algorithm_list(origin, key, raw[key]) for name, key in IMPLEMENTATION_KEYS.items() if key in raw
    }
    return SystemConfig(
        scheduling_policy=policy,
        collective_optimization=optimization,
        implementations=implementations,
        preferred_dataset_splits=splits,
        active_chunks_per_dimension=active,
        endpoint_delay_ns=endpoint_delay_ns,
        local_mem_bw_gbps=local_mem_bw_gbps,
        peak_perf_tflops=peak_perf_tflops,
        roofline_enabled=roofline_enabled,
        replay_only=replay_only,
        trace_enabled=trace_enabled,
        raw=raw,
        path=path,
        unknown_keys=tuple(key for key in raw if key not in KNOWN_SYSTEM_KEYS),
    )


# ---------------------------------------------------------------------------------------------
# Network


def load_network(path: PathLike, overrides: Mapping[str, Any] | None = None) -> NetworkConfig:
    """Read and check an analytical network YAML file (§4.2); ``overrides`` replace whole keys first."""
    path = Path(path)
    raw = _read_yaml_mapping(path, "network configuration")
    overrides = dict(overrides or {})
    origin = _Origin(path, frozenset(overrides), numbers_as_text=True)
    _check_override_keys(origin, overrides, NETWORK_KEYS)
    raw.update(overrides)

    lists: dict[str, list[Any]] = {}
    for key in NETWORK_KEYS:
        if key not in raw:
            old = [k for k in _OLD_NETWORK_KEYS if k in raw]
            hint = f"write {_NETWORK_EXAMPLE}"
            if old:
                hint = f"{', '.join(old)} belong to an older format ASTRA-sim no longer reads; {hint}"
            raise origin.error(f"network configuration has no {key!r} (a list with one entry per dimension)", hint=hint)
        value = raw[key]
        lists[key] = list(value) if isinstance(value, (list, tuple)) else [value]

    lengths = {key: len(values) for key, values in lists.items()}
    if len(set(lengths.values())) != 1 or not lengths["topology"]:
        counts = ", ".join(f"{key} {n}" for key, n in lengths.items())
        raise origin.error(
            f"{', '.join(NETWORK_KEYS)} must each list one entry per dimension, but have {counts} entries",
            hint="give every key the same number of entries (at least one)",
        )

    by_lower_name = {name.lower(): name for name in TOPOLOGIES}
    topology = []
    for index, name in enumerate(lists["topology"]):
        normalised = by_lower_name.get(name.lower()) if isinstance(name, str) else None
        if normalised is None:
            raise origin.error(
                f"{origin.describe('topology', name, index)} is not one of {', '.join(TOPOLOGIES)}",
                hint=f"use {', '.join(TOPOLOGIES)}",
            )
        topology.append(normalised)

    npus_count = _checked_list(
        origin, lists, "npus_count", _integer, lambda n: n >= 1, "must be at least 1", "give the NPUs of the dimension"
    )
    if len(npus_count) > 1 and 1 in npus_count:
        index = npus_count.index(1)
        raise origin.error(
            f"{origin.describe('npus_count', 1, index)} must be > 1: a dimension of one NPU has no links",
            hint="drop the dimension or give it at least 2 NPUs",
        )
    # a single dimension of one NPU is a one-GPU system (replaying a single-rank trace); ASTRA-sim
    # itself wants two or more
    bandwidth_gbps = _checked_list(
        origin, lists, "bandwidth", _real, lambda b: b > 0,
        "must be > 0 GB/s: every message would take forever", "give the link bandwidth in GB/s, e.g. 50",
    )  # fmt: skip
    latency_ns = _checked_list(
        origin,
        lists,
        "latency",
        _real,
        lambda lat: lat >= 0,
        "must be >= 0 ns",
        "give the link latency in ns, e.g. 500",
    )
    return NetworkConfig(tuple(topology), tuple(npus_count), tuple(bandwidth_gbps), tuple(latency_ns), path=path)


def _checked_list(
    origin: _Origin,
    lists: Mapping[str, list[Any]],
    key: str,
    parse: Callable[[_Origin, str, Any, int], Any],
    ok: Callable[[Any], bool],
    why: str,
    hint: str,
) -> list[Any]:
    """Every value of the per-dimension list ``key``, parsed, each one checked by ``ok``."""
    out = []
    for index, value in enumerate(lists[key]):
        parsed = parse(origin, key, value, index)
        if not ok(parsed):
            raise origin.error(f"{origin.describe(key, value, index)} {why}", hint=hint)
        out.append(parsed)
    return out


def scale_network(network: NetworkConfig, *, bandwidth_scale: float = 1.0, latency_scale: float = 1.0) -> NetworkConfig:
    """``network`` with every link bandwidth multiplied by ``bandwidth_scale`` and latency by ``latency_scale``."""
    if not (math.isfinite(bandwidth_scale) and bandwidth_scale > 0):
        raise ChakraInputError(
            f"bandwidth scale {bandwidth_scale:g} must be a finite number > 0",
            hint="e.g. 2 doubles every link's bandwidth, 0.5 halves it",
        )
    if not (math.isfinite(latency_scale) and latency_scale >= 0):
        raise ChakraInputError(
            f"latency scale {latency_scale:g} must be a finite number >= 0",
            hint="e.g. 0.5 halves every link's latency, 0 removes it",
        )
    return replace(
        network,
        bandwidth_gbps=tuple(b * bandwidth_scale for b in network.bandwidth_gbps),
        latency_ns=tuple(lat * latency_scale for lat in network.latency_ns),
    )


# ---------------------------------------------------------------------------------------------
# Remote memory


def load_remote_memory(path: PathLike | None) -> RemoteMemoryConfig:
    """Read and check an ASTRA-sim remote memory JSON file (§4.3); ``None`` means no remote memory.

    A zero ``remote-mem-bw`` is kept: it only matters if the workload has memory nodes, and the
    simulator refuses those then.
    """
    if path is None:
        return RemoteMemoryConfig("NO_MEMORY_EXPANSION")
    path = Path(path)
    raw = _read_json_object(path, "remote memory configuration")
    origin = _Origin(path)

    key = "memory-type"
    if key not in raw:
        raise origin.error(
            f"remote memory configuration has no {key!r}: ASTRA-sim leaves the memory type undefined without it",
            hint=f'add "{key}": "NO_MEMORY_EXPANSION" (or one of {", ".join(MEMORY_TYPES[1:])})',
        )
    memory_type = _choice(origin, key, raw[key], MEMORY_TYPES)

    key = "remote-mem-latency"
    latency_ns = _real(origin, key, raw.get(key, 0.0))
    _at_least(origin, key, raw.get(key), latency_ns, 0, strict=False, why="it is a latency in ns")

    key = "remote-mem-bw"
    bandwidth = _real(origin, key, raw.get(key, 0.0))
    _at_least(origin, key, raw.get(key), bandwidth, 0, strict=False, why="it is a bandwidth in bytes/ns")

    node_shape: dict[str, int | None] = {}
    for key in ("num-nodes", "num-npus-per-node"):
        if key not in raw:
            if memory_type == "PER_NODE_MEMORY_EXPANSION":
                raise origin.error(
                    f"PER_NODE_MEMORY_EXPANSION needs {key!r}: ASTRA-sim would divide by zero finding a rank's node",
                    hint='give "num-nodes" and "num-npus-per-node", e.g. 2 and 8',
                )
            node_shape[key] = None
            continue
        count = _integer(origin, key, raw[key])
        _at_least(origin, key, raw[key], count, 0, strict=True, why="it counts nodes or NPUs")
        node_shape[key] = count

    return RemoteMemoryConfig(
        memory_type=memory_type,
        latency_ns=latency_ns,
        bandwidth_bytes_per_ns=bandwidth,
        num_nodes=node_shape["num-nodes"],
        npus_per_node=node_shape["num-npus-per-node"],
        path=path,
    )


# ---------------------------------------------------------------------------------------------
# Overrides


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``"key=value"`` (``--set``) into the key and the value read as YAML (``8``, ``[100, 50]``, ``FIFO``)."""
    key, sep, value_text = text.partition("=")
    key, value_text = key.strip(), value_text.strip()
    if not sep or not key:
        raise ChakraInputError(
            f"override {text!r} is not key=value",
            hint="write e.g. preferred-dataset-splits=8 or bandwidth=[100,50]",
        )
    if not value_text:
        raise ChakraInputError(f"override {text!r} has no value after '='", hint=f"write e.g. {key}=8")
    try:
        value = yaml.safe_load(value_text)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or "not a YAML value"
        raise ChakraInputError(
            f"override {text!r}: cannot read the value: {problem}",
            hint="write a number, a word or a list such as [100,50]",
        ) from None
    return key, _numbers_from_text(value)


def _numbers_from_text(value: Any) -> Any:
    # PyYAML follows YAML 1.1 and reads "1e9" (no dot) as a string; a user typing it means the number
    if isinstance(value, str) and _NUMERIC_TEXT.fullmatch(value):
        return float(value)
    if isinstance(value, list):
        return [_numbers_from_text(item) for item in value]
    return value
