"""Custom collective algorithms on the command line (issue 32): ``chakra generate collective``
writes one as per-rank ETs, ``chakra convert msccl`` imports one from MSCCL's XML. The commands join
the ``generate`` and ``convert`` groups."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from chakra.cli.console import note, print_table, stdout
from chakra.cli.convert_cmds import convert_app
from chakra.cli.generate_cmds import generate_app
from chakra.errors import ChakraInputError

if TYPE_CHECKING:
    from chakra.generate.collective import AlgorithmSpec

#: This module's own group: empty (its commands join ``generate`` and ``convert``); chakra.cli.main
#: imports it for that.
app = typer.Typer()


@generate_app.command("collective")
def collective(
    output: Path = typer.Option(..., "-o", "--output", help="Prefix of the rank files: PREFIX.{rank}.et."),
    algorithm: str = typer.Option(
        "ring", "--algorithm", help="ring, bidirectional-ring, direct, halving-doubling or double-binary-tree."
    ),
    collective_name: str = typer.Option(
        "all-reduce", "--collective", help="all-reduce, reduce-scatter, all-gather or all-to-all."
    ),
    ranks: int = typer.Option(8, "--ranks", help="Ranks of the algorithm (the collective's group size)."),
    size: str = typer.Option(
        "1MiB", "--size", help="The collective's comm_size (all-gather: each rank's part): 512, 64KiB, 1MiB, ..."
    ),
    local_mem_bw: float = typer.Option(
        50.0, "--local-mem-bw", help="GB/s of the local reductions (each a COMP node of whole µs)."
    ),
    compare: Path | None = typer.Option(
        None, "--compare", help="A network YAML of --ranks NPUs: time the algorithm against the built-in one there."
    ),
    endpoint_delay: float = typer.Option(
        10.0, "--endpoint-delay", help="With --compare: the built-in algorithm's memory-bus crossing (ns)."
    ),
) -> None:
    """Write a collective algorithm as per-rank ETs of SEND, RECV and COMP nodes, to edit and simulate.

    The files are what ASTRA-sim's custom collectives take: name the prefix in the system file as
    "all-reduce-implementation-custom": ["PREFIX"] (or the all-gather, reduce-scatter, all-to-all
    key), with "preferred-dataset-splits": 1, and chakra simulate (either network model) or
    ASTRA-sim runs it for every collective of that type.

    --compare NET.yml simulates one collective with it and with ASTRA-sim's built-in algorithm of the
    same name (ring, direct, halvingDoubling, doubleBinaryTree; one chunk) and says by how much and
    why they differ.

    Example: chakra generate collective -o algo/ring --algorithm ring --collective all-reduce --ranks 8
    --size 1MiB --compare examples/astra/network.yml
    """
    from chakra.generate.collective import AlgorithmSpec, algorithm_ranks, write_algorithm
    from chakra.generate.sizes import parse_size
    from chakra.schema.protobuf.et_def_pb2 import COMM_SEND_NODE, COMP_NODE

    spec = AlgorithmSpec(algorithm, collective_name, ranks, parse_size(size, what="--size"), local_mem_bw)
    nodes = algorithm_ranks(spec)
    written = write_algorithm(output, spec, nodes)
    rows: dict[tuple[int, int, int, int], list[int]] = defaultdict(list)  # equal ranks on one row
    for rank, rank_nodes in enumerate(nodes):
        sends = [node for node in rank_nodes if node.type == COMM_SEND_NODE]
        sent = sum(attr.int64_val for node in sends for attr in node.attr if attr.name == "comm_size")
        reductions = sum(node.type == COMP_NODE for node in rank_nodes)
        rows[(len(rank_nodes), len(sends), sent, reductions)].append(rank)
    table = Table(title=f"{spec.algorithm} {spec.collective}: {output}.{{rank}}.et", title_justify="left")
    for column in ("ranks", "nodes", "sends", "bytes sent", "reductions"):
        table.add_column(column, justify="right")
    for (count, sends_count, sent, reductions), members in rows.items():
        label = str(members[0]) if len(members) == 1 else f"{len(members)} ranks ({members[0]}-{members[-1]})"
        table.add_row(label, f"{count:,}", f"{sends_count:,}", f"{sent:,}", f"{reductions:,}")
    print_table(table)
    stdout.print(f"wrote {len(written.paths)} files; in the system file: ", end="")
    key = f"{spec.collective}-implementation-custom"
    stdout.print(Text(f'"{key}": ["{output}"], "preferred-dataset-splits": 1'), soft_wrap=True)
    if compare is not None:
        _compare_with_built_in(output, spec, compare, endpoint_delay)


def _compare_with_built_in(output: Path, spec: AlgorithmSpec, network_path: Path, endpoint_delay_ns: float) -> None:
    """Print the algorithm's time against the built-in algorithm of the same name, and why they differ."""
    from chakra.generate.collective import BUILT_IN_NAMES
    from chakra.sim.config import load_network
    from chakra.sim.custom_check import compare_with_built_in

    built_in = BUILT_IN_NAMES.get(spec.algorithm)
    if built_in is None:
        note(f"ASTRA-sim has no built-in {spec.algorithm}: nothing to compare")
        return
    network = load_network(network_path)
    if network.num_npus != spec.ranks:
        raise ChakraInputError(
            f"the network has {network.num_npus} NPUs and the algorithm {spec.ranks} ranks",
            path=network_path,
            hint="give --compare a network of --ranks NPUs",
        )
    compared = compare_with_built_in(
        output, spec.comm_type, spec.size_bytes, built_in, network, endpoint_delay_ns, spec.local_mem_bw_gbps
    )
    stdout.print(
        f"on {network_path.name}: this algorithm {compared.custom_ns:,} ns, ASTRA-sim's built-in {built_in} "
        f"{compared.built_in_ns:,} ns ({compared.custom_ns - compared.built_in_ns:+,} ns)"
    )
    if compared.reasons:
        note("why they differ: " + "; ".join(compared.reasons))


@convert_app.command("msccl")
def convert_msccl_cmd(
    program: Path = typer.Argument(..., help="An MSCCL XML program (MSCCLang's output): <algo> with a <gpu> per rank."),
    output: Path = typer.Option(..., "-o", "--output", help="Output prefix: writes PREFIX.{gpu}.et."),
    size: str = typer.Option(
        ..., "--size", help="The collective's comm_size: 512, 64KiB, 1MiB, ... (split into the GPU's i_chunks)."
    ),
    collective: str | None = typer.Option(
        None, "--collective", help="allreduce, allgather, reducescatter, alltoall, ... (default: the program's coll)."
    ),
) -> None:
    """Convert an MSCCL XML program to the per-rank ETs of a custom collective, node by node as
    ASTRA-sim's collectiveapi converter writes them (fused steps as their parts). Name the prefix in
    the system file: "all-reduce-implementation-custom": ["PREFIX"], "preferred-dataset-splits": 1.

    Example: chakra convert msccl allreduce_ring.xml -o algo/ring --size 1MiB
    """
    from chakra.generate.sizes import parse_size
    from chakra.msccl import convert_msccl

    conversion = convert_msccl(program, output, parse_size(size, what="--size"), collective)
    counts = sorted(set(conversion.nodes_per_rank.values()))
    nodes = f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,}-{counts[-1]:,}"
    steps = ", ".join(f"{count:,} {kind}" for kind, count in sorted(conversion.steps.items()))
    stdout.print(
        f"wrote {len(conversion.written.paths)} files {output}.{{gpu}}.et ({conversion.collective}): {nodes} nodes "
        f"per rank, from {steps} steps"
    )
