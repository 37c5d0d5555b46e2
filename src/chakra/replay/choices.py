"""The choices and bounds of a replay, in a module of their own: the ``chakra`` command offers them at
start-up without importing the replay (torch)."""

from __future__ import annotations

from enum import Enum


class ComputeMode(str, Enum):
    """What a compute node does when replayed (see :mod:`chakra.replay.issue`)."""

    DURATION = "duration"
    KERNELS = "kernels"
    ATEN = "aten"
    NONE = "none"


class Backend(str, Enum):
    """The ``torch.distributed`` backend of the ranks: ``auto`` is NCCL when there is a CUDA device
    for every rank, else gloo (:func:`chakra.replay.launch.choose_backend`)."""

    AUTO = "auto"
    GLOO = "gloo"
    NCCL = "nccl"


#: How far a rank's replayed step may be from its reference before the replay check fails (issue
#: 18: a converted job replayed with its recorded durations, on a loaded 2-core machine).
REPLAY_CHECK_TOLERANCE = 0.15
