"""The list scheduler of the core: recorded durations, one op at a time per thread and stream.

:mod:`chakra.schedule.rank` schedules one rank (the producers' fidelity check, and the timing every
analysis of :mod:`chakra.analyze` starts from); :mod:`chakra.schedule.ranks` schedules every rank
together, each receive after its send (the fidelity check of producers whose transfers carry their
time). Both are in the core so that a front end checks what it wrote without importing a consumer.
"""
