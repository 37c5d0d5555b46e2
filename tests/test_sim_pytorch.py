"""End to end: a real 2-rank PyTorch job, converted, simulated, and asked what-if questions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import TRAINING_JOB_ARGS, record_gloo

from chakra.pytorch.workload import convert_workload
from chakra.schedule.rank import schedule_file
from chakra.sim.config import load_network, load_system, scale_network
from chakra.sim.run import simulate_workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "astra"
#: A network fast enough that communication costs next to nothing next to gloo's CPU work.
FAST_BANDWIDTH_GBPS, FAST_LATENCY_NS = 400.0, 500.0
STEP_TOLERANCE = 0.10  # the bound on simulated vs measured step time
#: Recordings made again when one lands outside the bound (a stalled machine, see the test).
RERECORDINGS = 2


@pytest.fixture(scope="module")
def converted(gloo_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("sim_pytorch") / "job"
    convert_workload(str(gloo_traces / "host.{rank}.json"), str(gloo_traces / "device.{rank}.json"), prefix)
    return prefix


@pytest.fixture(scope="module")
def converted_training(gloo_training_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("sim_training") / "job"
    traces = gloo_training_traces
    convert_workload(str(traces / "host.{rank}.json"), str(traces / "device.{rank}.json"), prefix)
    return prefix


@pytest.fixture(scope="module")
def system():
    return load_system(EXAMPLES / "system.json")


@pytest.fixture(scope="module")
def fast_network():
    network = load_network(EXAMPLES / "ring2.yml")
    return dataclasses.replace(network, bandwidth_gbps=(FAST_BANDWIDTH_GBPS,), latency_ns=(FAST_LATENCY_NS,))


def finish_us(prefix: Path, system, network, **options) -> float:
    result = simulate_workload(prefix, system, network, cpu_per_thread=True, **options)
    return result.finish_ns / 1e3


def _step_error(prefix: Path, system, network) -> tuple[float, float]:
    """(simulated, measured) step time in µs: the slowest rank's span."""
    measured_us = max(schedule_file(f"{prefix}.{rank}.et").measured_span_us for rank in (0, 1))
    return finish_us(prefix, system, network), measured_us


def test_a_training_job_on_a_fast_network_lands_near_its_measured_step(
    converted_training, system, fast_network, tmp_path: Path
):
    simulated_us, measured_us = _step_error(converted_training, system, fast_network)
    tries = [(simulated_us, measured_us)]
    for attempt in range(RERECORDINGS):
        if abs(simulated_us - measured_us) <= STEP_TOLERANCE * measured_us:
            break
        # two ranks on two cores: a stall of the machine during one recorded step (gloo waiting
        # on a descheduled peer, the suite's own work) is real time no model predicts; a stalled
        # recording measures the machine, not the job, so the job is recorded again
        traces = record_gloo(tmp_path / f"again{attempt}", *TRAINING_JOB_ARGS)
        prefix = tmp_path / f"again{attempt}" / "job"
        convert_workload(str(traces / "host.{rank}.json"), str(traces / "device.{rank}.json"), prefix)
        simulated_us, measured_us = _step_error(prefix, system, fast_network)
        tries.append((simulated_us, measured_us))
    assert abs(simulated_us - measured_us) <= STEP_TOLERANCE * measured_us, tries


def test_halving_compute_shortens_a_recorded_training_step(converted_training, system, fast_network):
    # the ratio depends on how compute-bound the recording came out (a loaded machine records
    # longer waits); its magnitude is checked on generated workloads (test_sim_engine.py)
    base = finish_us(converted_training, system, fast_network)
    assert finish_us(converted_training, system, fast_network, compute_scale=0.5) < base


def test_replay_only_reproduces_each_rank(converted, system, fast_network):
    replaying = dataclasses.replace(system, replay_only=True)
    result = simulate_workload(converted, replaying, fast_network, cpu_per_thread=True)
    for rank, stats in result.ranks.items():
        measured_us = schedule_file(f"{converted}.{rank}.et").measured_span_us
        assert abs(stats.finish_ns / 1e3 - measured_us) <= STEP_TOLERANCE * measured_us


def test_a_slower_network_makes_the_step_longer(converted, system, fast_network):
    base = finish_us(converted, system, fast_network)
    slow = scale_network(fast_network, bandwidth_scale=1e-4, latency_scale=1000)
    assert finish_us(converted, system, slow) > base * 1.05


def test_twice_the_bandwidth_lies_between_the_slow_and_the_fast_network(converted, system, fast_network):
    # on a recording, how much of the communication the compute hides depends on how the recorded
    # steps overlapped; that twice the bandwidth halves the added time is checked on generated
    # workloads (test_sim_engine.py), here only the order of the three
    slow = dataclasses.replace(fast_network, bandwidth_gbps=(0.001,))
    fast_us = finish_us(converted, system, fast_network)
    slow_us = finish_us(converted, system, slow)
    twice_us = finish_us(converted, system, scale_network(slow, bandwidth_scale=2.0))
    assert fast_us < twice_us < slow_us
