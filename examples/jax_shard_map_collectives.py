"""Compile a ``shard_map`` program that issues every collective XLA has (all-reduce, all-gather,
reduce-scatter, all-to-all and a ring collective-permute) on 8 forced CPU devices, and save its
optimized HLO module: a test input for the XLA front end (``chakra convert xla``).

Usage: python examples/jax_shard_map_collectives.py OUT_DIR   (writes OUT_DIR/collectives.hlo.pb, .txt)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Devices of the forced host platform; set before JAX is imported.
DEVICES = 8
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES}"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from chakra.xla.collect import collect_step  # noqa: E402

try:
    from jax import shard_map  # type: ignore[attr-defined]  # jax >= 0.6
except ImportError:  # older jax
    from jax.experimental.shard_map import shard_map  # type: ignore[no-redef]

#: Rows of the global array (each device holds ROWS / DEVICES) and columns.
ROWS, COLUMNS = 128, 8


def body(x: jax.Array) -> jax.Array:
    total = lax.psum(x, "i")
    gathered = lax.all_gather(x, "i", tiled=True)
    scattered = lax.psum_scatter(gathered, "i", tiled=True)
    exchanged = lax.all_to_all(x, "i", 0, 0, tiled=True)
    shifted = lax.ppermute(x, "i", [(d, (d + 1) % DEVICES) for d in range(DEVICES)])
    return total + scattered + exchanged + shifted


def main(out: Path) -> None:
    mesh = jax.make_mesh((DEVICES,), ("i",), axis_types=(AxisType.Explicit,))
    program = jax.jit(shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    x = jax.device_put(jnp.arange(float(ROWS * COLUMNS)).reshape(ROWS, COLUMNS), NamedSharding(mesh, P("i")))
    collect_step(program, (x,), out, name="collectives")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
