"""MkDocs hook: the configuration files' reference (``reference/configuration.md``), its key tables
read from the schemas the simulator reads the files with (``SystemFile``, ``NetworkFile``,
``RemoteMemoryFile``), so a key added to a schema without a line here fails the build."""

from __future__ import annotations

from typing import Any

import msgspec
from mkdocs.structure.files import File, Files

PAGE = "reference/configuration.md"

#: What each key of a system file does here; the schema gives its type and default.
SYSTEM_KEYS = {
    "scheduling-policy": "Which ready chunk a dimension's queue serves first: `LIFO` or `FIFO` (`EXPLICIT` is "
    "read as ASTRA-sim reads it). Required: ASTRA-sim leaves it uninitialised without it.",
    "collective-optimization": "`baseline` or `localBWAware` (ASTRA-sim's spelling): how a collective over "
    "several dimensions is planned. Only a native all-reduce over several dimensions needs it.",
    "preferred-dataset-splits": "Chunks a collective is split into, each simulated as a stream of its own. "
    "Required: ASTRA-sim divides by it.",
    "active-chunks-per-dimension": "Chunks a dimension runs at once.",
    "endpoint-delay": "ns a member waits after each message of a built-in algorithm it receives.",
    "local-mem-bw": "GB/s of an NPU's memory: the cost of reductions, and memory-bound time under the "
    "roofline. Left out, reductions are free, as in ASTRA-sim's binaries (with a warning).",
    "peak-perf": "TFLOPS of an NPU, for the roofline.",
    "roofline-enabled": "1: a compute node takes the roofline's time from `num_ops` and `tensor_size` "
    "instead of its `duration_micros`.",
    "replay-only": "1: every node, communication included, takes its recorded `duration_micros`.",
    "trace-enabled": "ASTRA-sim's per-node trace printing; read, no effect on timing.",
    "chakra-astra-compat": "This package's key (ASTRA-sim ignores it): 1 treats the collective types "
    "ASTRA-sim does not simulate as it does (a BROADCAST replays its `duration_micros`; REDUCE, GATHER, "
    "SCATTER, REDUCE_SCATTER_BLOCK and BARRIER are refused). Same as `--astra-compat`.",
    "all-reduce-implementation": "The algorithm of each network dimension for an all-reduce: `ring`, "
    "`direct`, `directN`, `halvingDoubling`, `doubleBinaryTree` (and their `one...` forms), one per dimension.",
    "reduce-scatter-implementation": "As `all-reduce-implementation`, for reduce-scatters.",
    "all-gather-implementation": "As `all-reduce-implementation`, for all-gathers.",
    "all-to-all-implementation": "As `all-reduce-implementation`, for all-to-alls.",
    "all-reduce-implementation-custom": "A list of one path prefix: every all-reduce runs the algorithm "
    "written as Chakra ETs `PREFIX.{position}.et` ([collective algorithms](../tutorials/collective-algorithms.md)).",
    "reduce-scatter-implementation-custom": "As `all-reduce-implementation-custom`, for reduce-scatters.",
    "all-gather-implementation-custom": "As `all-reduce-implementation-custom`, for all-gathers.",
    "all-to-all-implementation-custom": "As `all-reduce-implementation-custom`, for all-to-alls.",
    "per-node-custom-implementation": "A YAML file mapping workload node ids to custom algorithm prefixes "
    "(`node_id: path/to/algorithm`, one a line), found as ASTRA-sim finds it.",
}

#: Keys ASTRA-sim reads or documents that the schema does not type, and what becomes of them here.
OTHER_SYSTEM_KEYS = {
    "model-shared-bus": "`1` (ASTRA-sim's LogGP model of the NPU-memory bus) is refused in one line; `0` is "
    "ASTRA-sim's default.",
    "L, o, g, G": "The LogGP parameters of `model-shared-bus`; read, no effect while it is 0.",
    "local-reduction-delay": "Read; ASTRA-sim's binaries do not time reductions by it either.",
    "track-local-mem, local-mem-trace-filename": "ASTRA-sim's local memory trace; read, no trace written.",
    "intra-dimension-scheduling, inter-dimension-scheduling": "Documented upstream but not parsed there "
    "(fixed to FIFO and ascending); read, no effect.",
    "boost-mode": "Read, no effect (as in ASTRA-sim's binaries).",
}

#: What each key of a network file does (one value per network dimension, lowest first).
NETWORK_KEYS = {
    "topology": "`Ring`, `FullyConnected` or `Switch`.",
    "npus_count": "NPUs along the dimension; the product is the number of ranks.",
    "bandwidth": "GB/s of one link of the dimension.",
    "latency": "ns a message takes on one link before its bytes.",
}

#: What each key of a remote memory file does.
MEMORY_KEYS = {
    "memory-type": "`NO_MEMORY_EXPANSION`, `PER_NPU_MEMORY_EXPANSION`, `PER_NODE_MEMORY_EXPANSION` or "
    "`MEMORY_POOL`: where MEM_LOAD and MEM_STORE nodes go.",
    "remote-mem-latency": "ns before a remote access's bytes.",
    "remote-mem-bw": "Bytes per ns of the remote memory.",
    "num-nodes": "Nodes sharing the memory (`PER_NODE_MEMORY_EXPANSION`).",
    "num-npus-per-node": "NPUs per node (`PER_NODE_MEMORY_EXPANSION`).",
}


def key_table(schema: type[msgspec.Struct], meanings: dict[str, str]) -> list[str]:
    """A Markdown table of ``schema``'s keys: required or its default, and what it does."""
    fields = msgspec.inspect.type_info(schema).fields  # type: ignore[attr-defined]
    undocumented = sorted({f.encode_name for f in fields} - set(meanings))
    if undocumented:
        raise ValueError(f"{schema.__name__} keys without a line in docs/hooks/configuration_reference.py: "
                         f"{', '.join(undocumented)}")  # fmt: skip
    rows = ["| key | default | what it does |", "|---|---|---|"]
    for field in fields:
        default = "required" if field.required else "none" if field.default is None else f"`{field.default}`"
        rows.append(f"| `{field.encode_name}` | {default} | {meanings[field.encode_name]} |")
    return rows


def configuration_page() -> str:
    """The reference of every configuration file the simulator, the sweep and the replay read."""
    from chakra.sim.config.memory import RemoteMemoryFile
    from chakra.sim.config.network import NetworkFile
    from chakra.sim.config.system import SystemFile

    lines = [
        "# Configuration files",
        "",
        "`chakra simulate`, `chakra sweep` and `chakra replay` read ASTRA-sim's own configuration files, so",
        "one set of files serves both simulators (examples in `examples/astra/`); `chakra replay` takes a",
        "system and a network to compare with when an ET holds no times. The key tables below are",
        "generated from the schemas the files are read with. A mistake names the file and the key, with",
        "the fix; a key the simulator does not know is kept and reported. `--set KEY=VALUE` changes a",
        "system key for one run, `--set-network KEY=VALUE` a network key, and `chakra sweep --axis`",
        "takes a system key or `network.KEY`.",
        "",
        "## System file (JSON)",
        "",
        "The collective algorithms and how collectives are chunked and scheduled.",
        "",
        *key_table(SystemFile, SYSTEM_KEYS),
        "",
        "Other keys ASTRA-sim reads:",
        "",
        "| key | here |",
        "|---|---|",
        *(f"| `{key}` | {what} |" for key, what in OTHER_SYSTEM_KEYS.items()),
        "",
        "## Network file (YAML)",
        "",
        "One entry per dimension, the lowest (the one whose NPUs are nearest) first:",
        "",
        "```yaml",
        "topology: [ Switch, Switch ]",
        "npus_count: [ 8, 2 ]",
        "bandwidth: [ 400.0, 50.0 ]  # GB/s",
        "latency: [ 936.25, 2000.0 ]  # ns",
        "```",
        "",
        *key_table(NetworkFile, NETWORK_KEYS),
        "",
        "## Remote memory file (JSON, `--remote-memory`)",
        "",
        *key_table(RemoteMemoryFile, MEMORY_KEYS),
        "",
        "## Communicator groups (`PREFIX.comm_groups.json`)",
        "",
        "ASTRA-sim's format: a group id (a collective's `pg_name`) to its member ranks, sorted.",
        "Read beside the rank files by default (`--comm-groups` to give another).",
        "",
        "```json",
        '{"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}',
        "```",
        "",
        'A `pg_name` of `""` or `"0"` is every rank; any other is read as C++ `std::stoi` reads it',
        "(`chakra.groups`).",
        "",
        "## Rank classes (`PREFIX.classes.json`)",
        "",
        "chakra-et's own layout, written by `chakra generate llm --classes`: one ET per class of equivalent",
        "ranks and this mapping of every rank to its class, its group names and its peers. `chakra expand`",
        "writes the rank files ASTRA-sim reads. Its format is in `chakra.class_layout`",
        "([API](api/chakra.class_layout.md)).",
    ]
    return "\n".join(lines) + "\n"


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, PAGE, content=configuration_page()))
    return files
