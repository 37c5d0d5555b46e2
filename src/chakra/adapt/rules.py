"""What each consumer cannot take, as data: one :class:`TargetRules` per :class:`Target`.

The adapting passes (:mod:`chakra.adapt.plan`, :mod:`chakra.adapt.rewrite`) are generic; a target is
the list of node types it cannot run, the collectives it refuses and what it simulates in their place,
the attributes it reads (rewritten into their canonical value kind), and whether it reads compressed
files. What every consumer needs is not a rule: dependencies on absent ids are dropped and cycles
broken for all of them (no consumer can run such a graph). A new consumer is a new entry in
:data:`RULES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from chakra.schema.protobuf.et_def_pb2 import CollectiveCommType, NodeType
from chakra.validate.findings import Target

__all__ = ["RULES", "Target", "TargetRules", "rules_for"]


@dataclass(frozen=True)
class TargetRules:
    """What one consumer needs of a workload (everything else is copied as it is).

    * ``removed_node_types``: node types it cannot run; they are taken out and their dependents
      depend on their dependencies instead;
    * ``stand_ins``: collective type it refuses -> the type it simulates with the same traffic;
    * ``read_attrs``: attributes it reads, rewritten into their canonical member where stored in
      another that the reading rules read;
    * ``comm_off_cpu``: it aborts on a communication node marked ``is_cpu_op``;
    * ``plain_files``: it reads uncompressed files only.
    """

    target: Target
    description: str
    removed_node_types: frozenset[int]
    stand_ins: Mapping[int, int]
    read_attrs: frozenset[str]
    comm_off_cpu: bool
    plain_files: bool


#: ASTRA-sim (FeederV3 and its workload layer; ``reference/astra-sim.md`` §2, §7, checked against its
#: analytical builds in ``../shared/astra-sim``):
#:
#: * a METADATA node aborts builds with assertions (its statistics have no class for it) and, like an
#:   INVALID node, finishes without an event, so the nodes it releases are never issued when nothing
#:   else of the rank is pending (release builds end without running the rank);
#: * REDUCE, GATHER, SCATTER, REDUCE_SCATTER_BLOCK and BARRIER abort ("Unsupported collective comm
#:   type"). Each is written as the supported collective moving the same data: a barrier is an
#:   all-reduce of (next to) nothing in gloo and NCCL; a reduce moves what the first half of an
#:   all-reduce moves, so the all-reduce is an upper bound; gather and scatter move what all-gather and
#:   reduce-scatter move, with the same ``comm_size`` meaning; the block reduce-scatter is a
#:   reduce-scatter;
#: * a dependency on an absent id, or a cycle, stops it at load or deadlocks it.
ASTRA_SIM = TargetRules(
    target=Target.ASTRA_SIM,
    description="ASTRA-sim (FeederV3): runs every rank to its 'finished' line",
    removed_node_types=frozenset({NodeType.METADATA_NODE, NodeType.INVALID_NODE}),
    stand_ins={
        CollectiveCommType.BARRIER: CollectiveCommType.ALL_REDUCE,
        CollectiveCommType.REDUCE: CollectiveCommType.ALL_REDUCE,
        CollectiveCommType.GATHER: CollectiveCommType.ALL_GATHER,
        CollectiveCommType.SCATTER: CollectiveCommType.REDUCE_SCATTER,
        CollectiveCommType.REDUCE_SCATTER_BLOCK: CollectiveCommType.REDUCE_SCATTER,
    },
    read_attrs=frozenset(
        {
            "is_cpu_op",
            "num_ops",
            "tensor_size",
            "comm_type",
            "comm_size",
            "comm_src",
            "comm_dst",
            "comm_tag",
            "comm_priority",
            "pg_name",
            "involved_dim",
        }
    ),
    comm_off_cpu=True,
    plain_files=True,
)

#: Every consumer ``chakra adapt --target`` knows.
RULES: dict[Target, TargetRules] = {rules.target: rules for rules in (ASTRA_SIM,)}


def rules_for(target: Target | str) -> TargetRules:
    """The rules of ``target`` (a :class:`Target` or its name, e.g. ``"astra-sim"``).

    >>> from chakra.schema.protobuf.et_def_pb2 import CollectiveCommType
    >>> CollectiveCommType.Name(rules_for("astra-sim").stand_ins[CollectiveCommType.BARRIER])
    'ALL_REDUCE'
    """
    return RULES[Target(target)]
