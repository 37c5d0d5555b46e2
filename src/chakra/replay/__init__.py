"""Replay: Chakra ETs run on real hardware with PyTorch (``chakra replay``).

:mod:`~chakra.replay.program` orders a rank's nodes as the format's consumers issue them,
:mod:`~chakra.replay.issue` issues them (compute modes, every collective, sends and receives),
:mod:`~chakra.replay.launch` runs every rank as a process and diagnoses hangs.
"""
