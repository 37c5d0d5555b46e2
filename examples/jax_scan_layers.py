"""Compile the gradient of a stack of transformer-like layers written with ``lax.scan`` (each layer
single-head self-attention and a ReLU MLP, both with residuals) and save its optimized HLO module:
XLA keeps the layers as ``while`` loops of known trip count, which ``chakra convert xla`` unrolls.

Usage: python examples/jax_scan_layers.py OUT_DIR [--layers N]   (writes OUT_DIR/scan.hlo.pb, scan.hlo.txt)
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp

from chakra.xla.collect import collect_step

#: Layers (the loops' trip count; --layers sets it), tokens and width; the MLP is MLP_RATIO wide.
LAYERS = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 4
TOKENS, WIDTH, MLP_RATIO = 32, 64, 4

Weights = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]


def layer(h: jax.Array, w: Weights) -> tuple[jax.Array, None]:
    wq, wk, wv, wo, w_up, w_down = w
    scores = jax.nn.softmax((h @ wq) @ (h @ wk).T / jnp.sqrt(float(WIDTH)))
    h = h + (scores @ (h @ wv)) @ wo
    return h + jax.nn.relu(h @ w_up) @ w_down, None


def model(weights: Weights, x: jax.Array) -> jax.Array:
    h, _ = jax.lax.scan(layer, x, weights)
    return jnp.sum(h)


def main(out: Path) -> None:
    square = jnp.full((LAYERS, WIDTH, WIDTH), 0.01)
    up, down = jnp.full((LAYERS, WIDTH, MLP_RATIO * WIDTH), 0.01), jnp.full((LAYERS, MLP_RATIO * WIDTH, WIDTH), 0.01)
    weights, x = (square, square, square, square, up, down), jnp.ones((TOKENS, WIDTH))
    collect_step(jax.jit(jax.grad(model)), (weights, x), out, name="scan")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
