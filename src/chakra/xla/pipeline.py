"""The XLA front end from files to a checked workload: :func:`convert_xla_files` reads a module (and a
profile), converts it (:func:`chakra.xla.convert.convert_module`), writes one ET per device, and
with ``check`` schedules each device's ET against its measured span (:mod:`chakra.schedule.fidelity`).
``chakra convert xla`` renders the :class:`XlaResult` it returns.

Example:
    result = convert_xla_files("step.hlo.pb", "out/step", profile="prof/", check=True)
    result.fidelity.ok, result.to_dict()["nodes_per_device"]
"""

from __future__ import annotations

from typing import Any

from chakra.conversion import ConversionResult
from chakra.errors import ChakraInputError, PathLike
from chakra.output_size import MAX_OUTPUT_BYTES
from chakra.xla.convert import XlaConversion, convert_module, write_xla_workload
from chakra.xla.hlo import load_module
from chakra.xla.profile import load_profile

#: A device's scheduled span may be this far from its measured one before the check fails (issue
#: 16: 10 % on a 2-device job; more devices than cores make the measured timing noise).
XLA_FIDELITY_TOLERANCE = 0.10


class XlaResult(ConversionResult[XlaConversion]):
    """What converting a module did: the conversion, the files written, and the fidelity check (``None``
    when not asked for)."""

    def report(self) -> dict[str, Any]:
        conversion = self.conversion
        return {
            "module": conversion.module.proto.name,
            "devices": conversion.devices,
            "nodes_per_device": {str(d): len(n) for d, n in conversion.payloads.items()},
            "converted": dict(conversion.converted),
            "folded": dict(conversion.folded),
            "kept": dict(conversion.kept),
            "unrolled": dict(conversion.unrolled),
            "groups": len(conversion.groups),
            "notes": conversion.notes,
        }


def convert_xla_files(
    module: PathLike,
    output: PathLike,
    *,
    devices: int | None = None,
    profile: PathLike | None = None,
    check: bool = False,
    max_bytes: int = MAX_OUTPUT_BYTES,
) -> XlaResult:
    """Convert the serialized HLO module ``module`` (timed by the JAX ``profile`` if given) into
    ``OUTPUT.{device}.et``; ``check`` (needs ``profile``) schedules each device against its measured span."""
    if check and profile is None:
        raise ChakraInputError("--check needs --profile", hint="the fidelity check compares with measured times")
    measured = load_profile(profile) if profile is not None else None
    conversion = convert_module(load_module(module), devices, measured, max_bytes=max_bytes)
    written = write_xla_workload(conversion, output)
    fidelity = None
    if check:  # the scheduler loads only here: a conversion's start-up is part of its time
        from chakra.schedule.fidelity import check_fidelity, schedule_files

        fidelity = check_fidelity(schedule_files(written.paths), XLA_FIDELITY_TOLERANCE)
    return XlaResult(conversion, written, fidelity)
