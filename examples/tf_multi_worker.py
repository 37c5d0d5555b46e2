"""Train an MLP under tf.distribute.MultiWorkerMirroredStrategy in N worker processes on localhost and
record every worker's steps for the TensorFlow front end (``chakra.tensorflow``).

Usage: python examples/tf_multi_worker.py OUT_DIR [--workers N]
(writes OUT_DIR/worker{task}/run_metadata.pb and .../profile/ for each worker; then
``chakra convert tensorflow OUT_DIR -o OUT_DIR/et/step --check``)

The script starts N workers (default 2) on free 127.0.0.1 ports, each with its ``TF_CONFIG`` and
RING collectives over gRPC, and waits for them. Each worker all-reduces its gradients
(CollectiveReduceV2 over the workers) every step.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: Workers by default, steps recorded per worker (the converter takes the median one), and how long
#: a worker may take on a loaded machine.
DEFAULT_WORKERS = 2
STEPS = 6
WORKER_TIMEOUT_S = 600
#: The model: per-worker batch, input, hidden and output widths. The batch makes a step some 80 ms
#: here, so that the executor's thread wake-ups (a few a step, up to milliseconds each on a busy
#: machine, and in no op) stay small beside it: with a 64-row batch (6 ms steps) the replay of a
#: step was once 13 % short of its span beside a CPU hog, with this one at most 7 %.
BATCH, IN, HIDDEN, OUT = 4096, 64, 512, 16
LEARNING_RATE = 0.1


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def launch(out: Path, workers: int) -> None:
    """Start every worker and wait for all of them; a failed worker fails the run."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(workers)]}
    processes = []
    for task in range(workers):
        config = {"cluster": cluster, "task": {"type": "worker", "index": task}}
        env = {**os.environ, "TF_CONFIG": json.dumps(config)}
        command = [sys.executable, __file__, str(out), "--task", str(task)]
        processes.append(subprocess.Popen(command, env=env))
    failed = [task for task, p in enumerate(processes) if p.wait(timeout=WORKER_TIMEOUT_S) != 0]
    if failed:
        raise SystemExit(f"workers {failed} failed")


def work(out: Path, task: int) -> None:
    """One worker: build the strategy from TF_CONFIG, then record STEPS steps."""
    import tensorflow as tf

    from chakra.tensorflow.collect import collect

    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    features = tf.random.stateless_normal([BATCH * STEPS, IN], seed=(1, task))
    labels = tf.random.stateless_normal([BATCH * STEPS, OUT], seed=(2, task))
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(BATCH, drop_remainder=True).repeat()
    with strategy.scope():
        w1 = tf.Variable(tf.random.stateless_normal([IN, HIDDEN], seed=(5, 6)) * 0.1)
        w2 = tf.Variable(tf.random.stateless_normal([HIDDEN, OUT], seed=(7, 8)) * 0.1)

    def replica_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2) - y) ** 2)
        context = tf.distribute.get_replica_context()
        g1, g2 = context.all_reduce("mean", tape.gradient(loss, [w1, w2]))
        w1.assign_sub(LEARNING_RATE * g1)
        w2.assign_sub(LEARNING_RATE * g2)
        return loss

    @tf.function
    def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        return strategy.run(replica_step, args=(x, y))

    # each worker feeds its own shard: no auto-sharding policy to agree on
    batches = iter(dataset)
    with collect(out / f"worker{task}"):
        for _ in range(STEPS):
            step(*next(batches))


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    if "--task" in sys.argv:
        work(folder, int(sys.argv[sys.argv.index("--task") + 1]))
        # the recording is written; TensorFlow's teardown of a worker's gRPC server at interpreter exit
        # now and then frees twice and kills the process (seen once in a CI run: "double free or
        # corruption"), which would fail a complete recording: end here instead
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    else:
        launch(folder, int(sys.argv[sys.argv.index("--workers") + 1]) if "--workers" in sys.argv else DEFAULT_WORKERS)
