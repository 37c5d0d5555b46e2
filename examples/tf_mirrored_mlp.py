"""Train an MLP under tf.distribute.MirroredStrategy on logical CPU devices and record its steps for
the TensorFlow front end (``chakra.tensorflow``).

Usage: python examples/tf_mirrored_mlp.py OUT_DIR [--devices N] [--layers K] [--gather] [--keras]
(writes OUT_DIR/run_metadata.pb and OUT_DIR/profile/; then
``chakra convert tensorflow OUT_DIR -o OUT_DIR/et/step --check``)

One CPU is split into N logical devices (default 4); MirroredStrategy runs a replica on each and,
on CPU, all-reduces with CollectiveReduceV2. The hand-written step all-reduces the packed
gradients and the replicas' losses; with --gather it all-gathers the losses instead
(``ReplicaContext.all_gather``: two CollectiveGatherV2, the shapes and then the data padded to the
largest replica's at run time, whose size the graph cannot tell). With --keras a Keras model is
trained with ``model.fit`` instead (its train function is found in the collected graphs).
--layers sets the hidden layers of the hand-written MLP (default 1; benchmarks/tf_bench.py makes it
deep).
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

from chakra.tensorflow.collect import collect_tensorflow

#: Logical devices by default, and the steps recorded (the converter takes the median one).
DEFAULT_DEVICES = 4
STEPS = 6
#: The model: global batch, input, hidden and output widths.
BATCH, IN, HIDDEN, OUT = 64, 64, 128, 16
LEARNING_RATE = 0.1


def main(out: Path, devices: int, layers: int, keras: bool, gather: bool) -> None:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(devices)])
    features = tf.random.stateless_normal([BATCH * STEPS, IN], seed=(1, 2))
    labels = tf.random.stateless_normal([BATCH * STEPS, OUT], seed=(3, 4))
    # drop_remainder keeps the batch dimension static: the converter sizes tensors from shapes
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(BATCH, drop_remainder=True).repeat()
    if keras:
        with strategy.scope():
            model = tf.keras.Sequential(
                [tf.keras.Input((IN,)), tf.keras.layers.Dense(HIDDEN, activation="relu"), tf.keras.layers.Dense(OUT)]
            )
            model.compile(optimizer=tf.keras.optimizers.SGD(LEARNING_RATE), loss="mse")
        with collect_tensorflow(out):
            model.fit(dataset, epochs=1, steps_per_epoch=STEPS, verbose=0)
        return
    widths = [IN] + [HIDDEN] * layers + [OUT]
    with strategy.scope():
        weights = [
            tf.Variable(tf.random.stateless_normal([m, n], seed=(5, k)) * 0.1)
            for k, (m, n) in enumerate(itertools.pairwise(widths))
        ]

    def replica_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            h = x
            for w in weights[:-1]:
                h = tf.nn.relu(tf.matmul(h, w))
            loss = tf.reduce_mean((tf.matmul(h, weights[-1]) - y) ** 2)
        context = tf.distribute.get_replica_context()
        gradients = context.all_reduce("mean", tape.gradient(loss, weights))
        for w, g in zip(weights, gradients, strict=True):
            w.assign_sub(LEARNING_RATE * g)
        if gather:
            return tf.reduce_mean(context.all_gather(loss[None], axis=0))
        return context.all_reduce("mean", loss)

    @tf.function
    def step(batch: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        return strategy.run(replica_step, args=batch)

    batches = iter(strategy.experimental_distribute_dataset(dataset))
    with collect_tensorflow(out):
        for _ in range(STEPS):
            step(next(batches))


if __name__ == "__main__":
    count = int(sys.argv[sys.argv.index("--devices") + 1]) if "--devices" in sys.argv else DEFAULT_DEVICES
    hidden_layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 1
    main(Path(sys.argv[1]), count, hidden_layers, "--keras" in sys.argv, "--gather" in sys.argv)
