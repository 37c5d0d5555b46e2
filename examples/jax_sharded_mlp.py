"""Compile a data x model sharded MLP training step on 8 forced CPU devices and save its optimized,
scheduled HLO module: what the XLA front end (``chakra.xla``) reads.

Usage: python examples/jax_sharded_mlp.py OUT_DIR [--mesh DATAxMODEL] [--scale K] [--profile]
(writes OUT_DIR/step.hlo.pb, step.hlo.txt and step.cost.json: XLA's own cost analysis, per device;
with --profile also OUT_DIR/profile/, a JAX profile of PROFILED_STEPS steps after a warm-up one;
--scale multiplies every dimension, so that the ops outlast the runtime's overhead between them)

The mesh has a ``data`` axis of 4 and a ``model`` axis of 2: the hidden layer's weights are split
over ``model`` (an all-reduce among the 2 devices of each model group in the forward pass), the
batch over ``data`` (the gradients all-reduced among the 4 devices of each data group).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The default mesh: 4 (data) x 2 (model) devices of the forced host platform.
DEFAULT_MESH = "4x2"
#: Steps profiled with --profile, after one warm-up step: the converter takes the one of median span.
PROFILED_STEPS = 5


def _mesh_shape(argv: list[str]) -> tuple[int, int]:
    text = argv[argv.index("--mesh") + 1] if "--mesh" in argv else DEFAULT_MESH
    data, _, model = text.partition("x")
    return int(data), int(model)


DATA, MODEL = _mesh_shape(sys.argv)
# the device count is set before JAX is imported
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DATA * MODEL}"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from chakra.xla.collect import collect_step  # noqa: E402

SCALE = int(sys.argv[sys.argv.index("--scale") + 1]) if "--scale" in sys.argv else 1
BATCH, IN, HIDDEN, OUT = 32 * SCALE, 64 * SCALE, 128 * SCALE, 16 * SCALE
LEARNING_RATE = 0.1


def loss(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((jax.nn.relu(x @ w1) @ w2 - y) ** 2)


@jax.jit
def step(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2, x, y)
    return w1 - LEARNING_RATE * g1, w2 - LEARNING_RATE * g2


def main(out: Path, profile: bool) -> None:
    mesh = jax.make_mesh((DATA, MODEL), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    key = jax.random.key(0)
    w1 = jax.device_put(jax.random.normal(key, (IN, HIDDEN)), NamedSharding(mesh, P(None, "model")))
    w2 = jax.device_put(jax.random.normal(key, (HIDDEN, OUT)), NamedSharding(mesh, P("model", None)))
    x = jax.device_put(jax.random.normal(key, (BATCH, IN)), NamedSharding(mesh, P("data", None)))
    y = jax.device_put(jax.random.normal(key, (BATCH, OUT)), NamedSharding(mesh, P("data", None)))
    collect_step(step, (w1, w2, x, y), out, profile_steps=PROFILED_STEPS if profile else 0)


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--profile" in sys.argv)
