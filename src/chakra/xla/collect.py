"""Record a JAX step for the XLA front end: its compiled module and, when asked, a profile.

:func:`collect_step` compiles a jitted function for the given arguments and writes the optimized,
scheduled module (``OUT/NAME.hlo.pb``, what ``chakra convert xla`` reads), its text
(``NAME.hlo.txt``, for people) and XLA's own cost analysis of one device (``NAME.cost.json``).
With ``profile_steps`` it then runs one warm-up step and profiles that many more (``OUT/profile/``,
for ``--profile``). JAX is imported by the caller: this module only uses the objects it is handed,
so importing it needs no JAX.

Example:
    paths = collect_step(step, (w1, w2, x, y), "out", profile_steps=5)
    # chakra convert xla out/step.hlo.pb -o out/et/step --profile out/profile --check
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chakra.errors import ChakraInputError, PathLike


@dataclass(frozen=True)
class CollectedStep:
    """What :func:`collect_step` wrote: the module, its text, XLA's costs, and the profile folder
    (or ``None``)."""

    module: Path
    text: Path
    costs: Path
    profile: Path | None


def collect_step(
    jitted: Any,
    args: Sequence[Any],
    out: PathLike,
    *,
    name: str = "step",
    profile_steps: int = 0,
    block: Callable[[Any], Any] | None = None,
) -> CollectedStep:
    """Compile ``jitted`` (a ``jax.jit`` function) for ``args`` and save its module in ``out``;
    with ``profile_steps`` > 0 also profile that many calls after a warm-up one. ``block`` waits for
    a result (default ``jax.block_until_ready``)."""
    import jax  # the caller runs JAX already; this keeps `import chakra.xla.collect` free of it

    if profile_steps < 0:
        raise ChakraInputError(f"profile_steps must be >= 0, got {profile_steps}")
    wait = block or jax.block_until_ready
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    compiled = jitted.lower(*args).compile()
    module = compiled.runtime_executable().hlo_modules()[0]
    module_path, text_path = folder / f"{name}.hlo.pb", folder / f"{name}.hlo.txt"
    module_path.write_bytes(module.as_serialized_hlo_module_proto())
    text_path.write_text(compiled.as_text())
    costs_path = folder / f"{name}.cost.json"
    costs_path.write_text(json.dumps({key: float(value) for key, value in dict(compiled.cost_analysis()).items()}))
    if not profile_steps:
        return CollectedStep(module_path, text_path, costs_path, None)
    wait(jitted(*args))  # warm-up: the profile holds steady-state steps
    profile = folder / "profile"
    jax.profiler.start_trace(str(profile))
    try:
        for _ in range(profile_steps):
            result = jitted(*args)
        wait(result)
    finally:
        jax.profiler.stop_trace()
    return CollectedStep(module_path, text_path, costs_path, profile)
