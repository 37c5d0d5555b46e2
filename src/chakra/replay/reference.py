"""The step a replay is compared with when its ET records no times: the simulator's prediction.

A generated workload, a text workload or an ET shared without times has no recorded span;
:func:`simulated_reference` simulates it (``chakra.sim``) on a system and network the user names
and gives each rank its predicted finish as the reference of its replayed step.

Example:
    replay = replay_workload("out/llm", compute=ComputeMode.KERNELS)
    simulated_reference(replay, "system.json", "network.yml")
    replay.ranks[0].reference, replay.ranks[0].error    # "simulated", replayed / predicted - 1
"""

from __future__ import annotations

from chakra.errors import PathLike
from chakra.replay.launch import WorkloadReplay
from chakra.units import NS_PER_US


def simulated_reference(
    replay: WorkloadReplay, system: PathLike, network: PathLike, *, compute_scale: float = 1.0
) -> dict[int, float]:
    """Give every rank of ``replay`` without a recorded span the simulator's prediction of its step
    as its reference (µs; ``reference`` ``"simulated"``), simulated on ``system``/``network`` with a
    CPU slot per thread and a GPU slot per stream, as the replay runs compute. Returns the
    predictions of every rank."""
    from chakra.sim.config.network import load_network
    from chakra.sim.config.system import load_system
    from chakra.sim.run import simulate_workload

    result = simulate_workload(
        replay.prefix, load_system(system), load_network(network),
        compute_scale=compute_scale, cpu_per_thread=True, gpu_per_stream=True,
    )  # fmt: skip
    predicted = {rank: stats.finish_ns / NS_PER_US for rank, stats in result.ranks.items()}
    for rank, ranked in replay.ranks.items():
        if ranked.reference != "recorded" and rank in predicted:
            ranked.reference_us, ranked.reference = predicted[rank], "simulated"
    return predicted
