"""Compile a data x model sharded MLP training step on 8 forced CPU devices and save its optimized,
scheduled HLO module: what the XLA front end (``chakra.xla``) reads.

Usage: python examples/jax_sharded_mlp.py OUT_DIR
(writes OUT_DIR/step.hlo.pb, step.hlo.txt and step.cost.json: XLA's own cost analysis, per device)

The mesh has a ``data`` axis of 4 and a ``model`` axis of 2: the hidden layer's weights are split
over ``model`` (an all-reduce among the 2 devices of each model group in the forward pass), the
batch over ``data`` (the gradients all-reduced among the 4 devices of each data group).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

#: Devices of the forced host platform; set before JAX is imported.
DEVICES = 8
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES}"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

DATA, MODEL = 4, 2
BATCH, IN, HIDDEN, OUT = 32, 64, 128, 16
LEARNING_RATE = 0.1


def loss(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((jax.nn.relu(x @ w1) @ w2 - y) ** 2)


@jax.jit
def step(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2, x, y)
    return w1 - LEARNING_RATE * g1, w2 - LEARNING_RATE * g2


def main(out: Path) -> None:
    mesh = jax.make_mesh((DATA, MODEL), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    key = jax.random.key(0)
    w1 = jax.device_put(jax.random.normal(key, (IN, HIDDEN)), NamedSharding(mesh, P(None, "model")))
    w2 = jax.device_put(jax.random.normal(key, (HIDDEN, OUT)), NamedSharding(mesh, P("model", None)))
    x = jax.device_put(jax.random.normal(key, (BATCH, IN)), NamedSharding(mesh, P("data", None)))
    y = jax.device_put(jax.random.normal(key, (BATCH, OUT)), NamedSharding(mesh, P("data", None)))
    compiled = step.lower(w1, w2, x, y).compile()
    out.mkdir(parents=True, exist_ok=True)
    module = compiled.runtime_executable().hlo_modules()[0]
    (out / "step.hlo.pb").write_bytes(module.as_serialized_hlo_module_proto())
    (out / "step.hlo.txt").write_text(compiled.as_text())
    costs = compiled.cost_analysis()
    (out / "step.cost.json").write_text(json.dumps({k: float(v) for k, v in dict(costs).items()}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
