"""Simulation of Chakra workloads with ASTRA-sim's semantics.

:mod:`.config` (the system, network and remote-memory files), :mod:`.network` and :mod:`.collectives`
(the analytical models), :mod:`.program` (a rank's nodes as the simulator runs them), :mod:`.events`,
:mod:`.matching` and :mod:`.memory` (the parts the event loop drives), :mod:`.engine` (the loop),
:mod:`.results`, :mod:`.report`, :mod:`.run` (a workload on disk) and :mod:`.sweep` (what-if grids).
"""
