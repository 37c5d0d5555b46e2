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
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: Workers by default, steps recorded per worker (the converter takes the median one), and how long
#: a worker may take on a loaded machine.
DEFAULT_WORKERS = 2
STEPS = 6
WORKER_TIMEOUT_S = 600
#: Recordings tried when TensorFlow aborts a worker (see :func:`launch`).
ATTEMPTS = 3
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
    """Start every worker and wait for all of them; a failed worker fails the run, except that a run
    TensorFlow itself aborted is tried again (:data:`ATTEMPTS` in all)."""
    for attempt in range(1, ATTEMPTS + 1):
        codes = _run_workers(out, workers)
        failed = [task for task, code in enumerate(codes) if code != 0]
        if not failed:
            return
        # TensorFlow's runtime now and then aborts a worker in native code ("double free or
        # corruption", seen in CI runs, a signal rather than an error of this script): the run is
        # then incomplete through no fault of the model, and a fresh one records it
        aborted = all(codes[task] < 0 for task in failed)
        if not aborted or attempt == ATTEMPTS:
            raise SystemExit(f"workers {failed} failed (exit codes {[codes[t] for t in failed]})")
        print(f"workers {failed} were killed by signals {[-codes[t] for t in failed]}; recording again",
              file=sys.stderr)  # fmt: skip
        for task in range(workers):  # a profile of the failed run beside the new one would be read too
            shutil.rmtree(out / f"worker{task}", ignore_errors=True)


def _run_workers(out: Path, workers: int) -> list[int]:
    """Every worker's exit code (negative: killed by that signal); the others are stopped when one dies."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(workers)]}
    processes = []
    for task in range(workers):
        config = {"cluster": cluster, "task": {"type": "worker", "index": task}}
        env = {**os.environ, "TF_CONFIG": json.dumps(config)}
        command = [sys.executable, __file__, str(out), "--task", str(task)]
        processes.append(subprocess.Popen(command, env=env))
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while True:
        codes = [p.poll() for p in processes]
        if all(code == 0 for code in codes) or any(code not in (None, 0) for code in codes):
            break  # all done, or one died: the others would wait for its collectives until the deadline
        if time.monotonic() >= deadline:
            for p in processes:
                p.kill()
            raise SystemExit(f"the workers did not finish in {WORKER_TIMEOUT_S} s")
        time.sleep(0.2)
    for p in processes:
        if p.poll() is None:
            p.kill()
    return [p.wait() for p in processes]


def work(out: Path, task: int) -> None:
    """One worker: build the strategy from TF_CONFIG, then record STEPS steps."""
    import tensorflow as tf

    from chakra.tensorflow.collect import collect_tensorflow

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
    with collect_tensorflow(out / f"worker{task}"):
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
