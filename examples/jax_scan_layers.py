"""Compile the gradient of a stack of layers written with ``lax.scan`` (each layer a GEMM and a
tanh) and save its optimized HLO module: XLA keeps the layers as a ``while`` loop of known trip
count, which ``chakra convert xla`` unrolls.

Usage: python examples/jax_scan_layers.py OUT_DIR [--layers N]   (writes OUT_DIR/scan.hlo.pb, scan.hlo.txt)
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp

#: Layers (the loop's trip count; --layers sets it), batch and width: each layer multiplies
#: BATCH x WIDTH by WIDTH x WIDTH.
LAYERS = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 4
BATCH, WIDTH = 32, 64


def model(weights: jax.Array, x: jax.Array) -> jax.Array:
    def layer(h: jax.Array, w: jax.Array) -> tuple[jax.Array, None]:
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(layer, x, weights)
    return jnp.sum(h)


def main(out: Path) -> None:
    weights, x = jnp.ones((LAYERS, WIDTH, WIDTH)), jnp.ones((BATCH, WIDTH))
    compiled = jax.jit(jax.grad(model)).lower(weights, x).compile()
    out.mkdir(parents=True, exist_ok=True)
    module = compiled.runtime_executable().hlo_modules()[0]
    (out / "scan.hlo.pb").write_bytes(module.as_serialized_hlo_module_proto())
    (out / "scan.hlo.txt").write_text(compiled.as_text())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
