"""Pipeline schedules: the order in which one stage runs its forward and backward units (§3.1).

A unit is ``("F" | "B", micro-batch, chunk)``; chunks are the model chunks of one pipeline rank
(one without interleaving). Orders follow ``reference/workload-generators.md`` §3.1: GPipe (all
forwards, then all backwards), 1F1B (``p - i - 1`` warm-up forwards, then forward/backward pairs) and
Megatron's interleaved 1F1B.

Example:
    >>> " ".join(f"{u}{j}" for u, j, _ in pipeline_units("1f1b", stage=0, stages=2, m=3))
    'F0 F1 B0 F2 B1 B2'
"""

from __future__ import annotations

from chakra.generate.specs import WorkloadSpec


def pipeline_units(kind: str, stage: int, stages: int, m: int, chunks: int = 1) -> list[tuple[str, int, int]]:
    """Units ``("F"|"B", micro-batch, chunk)`` of ``stage`` in schedule order (§3.1)."""
    if kind == "gpipe":
        return [("F", j, 0) for j in range(m)] + [("B", j, 0) for j in range(m)]
    if kind == "interleaved":
        return _interleaved(stage, stages, m, chunks)
    warmup = min(stages - stage - 1, m)
    units = [("F", j, 0) for j in range(warmup)]
    for j in range(m - warmup):
        units += [("F", warmup + j, 0), ("B", j, 0)]
    return units + [("B", j, 0) for j in range(m - warmup, m)]


def _interleaved(stage: int, p: int, m: int, v: int) -> list[tuple[str, int, int]]:
    """Megatron's interleaved 1F1B (§3.1): virtual step ``k`` runs micro-batch
    ``(k div p·v)·p + k mod p`` of chunk ``(k mod p·v) div p`` forward (``v - 1 -`` that backward);
    ``min(2(p - i - 1) + (v - 1)·p, m·v)`` warm-up forwards, then forward/backward pairs, then the
    remaining backwards. Needs ``m`` to be a multiple of ``p``."""
    steps = m * v

    def unit(kind: str, k: int) -> tuple[str, int, int]:
        group = (k % (p * v)) // p
        return kind, (k // (p * v)) * p + k % p, group if kind == "F" else v - 1 - group

    warmup = min(2 * (p - stage - 1) + (v - 1) * p, steps)
    units = [unit("F", k) for k in range(warmup)]
    for k in range(steps - warmup):
        units += [unit("F", k + warmup), unit("B", k)]
    return units + [unit("B", k) for k in range(steps - warmup, steps)]


def schedule_units(spec: WorkloadSpec, stage: int) -> list[tuple[str, int, int]]:
    """The ``(F|B, micro-batch, chunk)`` order of ``stage`` under the spec's schedule (chunk 0
    unless interleaved; public for tests and tools)."""
    par = spec.parallel
    return pipeline_units(par.schedule, stage, par.pp, spec.micro_batches, par.virtual_stages)
