"""The TensorFlow front end from recordings to a checked workload: :func:`convert_tensorflow_recordings`
reads what :func:`chakra.tensorflow.collect.collect_tensorflow` wrote (one or many workers), converts
the step (:func:`chakra.tensorflow.convert.convert_workers`), writes one ET per device, and with
``check`` schedules each rank's ET against its measured span (:mod:`chakra.schedule.fidelity`).
``chakra convert tensorflow`` renders the :class:`TensorFlowResult` it returns.

Example:
    result = convert_tensorflow_recordings(["out/"], "out/et/step", check=True)
    result.fidelity.ok, result.to_dict()["devices"]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chakra.conversion import ConversionResult
from chakra.errors import ChakraInputError, PathLike
from chakra.tensorflow.convert import TfConversion, convert_workers, write_tf_workload
from chakra.tensorflow.recording import load_recorded_workers

#: A rank's scheduled span may be this far from its measured one before the check fails (issue 17).
TF_FIDELITY_TOLERANCE = 0.10


class TensorFlowResult(ConversionResult[TfConversion]):
    """What converting a step did: the conversion, the files written, and the fidelity check (``None``
    when not asked for)."""

    def report(self) -> dict[str, Any]:
        conversion = self.conversion
        return {
            "devices": conversion.devices,
            "nodes_per_rank": {str(r): len(n) for r, n in conversion.payloads.items()},
            "converted": dict(conversion.converted),
            "folded": dict(conversion.folded),
            "events": dict(conversion.events),
            "step": conversion.step_run.run if conversion.step_run is not None else None,
            "groups": {str(g): list(m) for g, m in conversion.groups.groups.items()},
            "notes": conversion.notes,
        }


def convert_tensorflow_recordings(
    recordings: Sequence[PathLike], output: PathLike, *, check: bool = False
) -> TensorFlowResult:
    """Convert the recorded workers under ``recordings`` into ``OUTPUT.{rank}.et`` (ranks worker-major,
    device-minor); ``check`` (needs a profile) schedules each rank against its measured span."""
    conversion = convert_workers(load_recorded_workers(list(recordings)))
    if check and not conversion.profiled:
        raise ChakraInputError("--check needs a profile", path=recordings[0],
                               hint="record with chakra.tensorflow.collect")  # fmt: skip
    written = write_tf_workload(conversion, output)
    fidelity = None
    if check:  # the scheduler loads only here: a conversion's start-up is part of its time
        from chakra.schedule.fidelity import check_fidelity, schedule_files

        fidelity = check_fidelity(schedule_files(written.paths), TF_FIDELITY_TOLERANCE)
    return TensorFlowResult(conversion, written, fidelity)
