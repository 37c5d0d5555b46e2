"""The XLA front end: JAX programs, and TensorFlow functions compiled with XLA, as Chakra ETs.

:mod:`~chakra.xla.collect` records a JAX step, :mod:`~chakra.xla.hlo` reads its module,
:mod:`~chakra.xla.costs` counts FLOPs and bytes, :mod:`~chakra.xla.profile` reads what a profile
measured, and :mod:`~chakra.xla.convert` writes one ET per device (``chakra convert xla``). Not
modelled yet: async collectives overlapping compute, conditionals and loops of unknown trip count
(kept as one node each).
"""
