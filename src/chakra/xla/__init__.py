"""The XLA front end: JAX and TensorFlow (XLA) programs as Chakra ETs. Partial (issue 16): the module
reader (:mod:`chakra.xla.hlo`), the cost model (:mod:`chakra.xla.costs`) and the conversion of a
loop-free SPMD module into one ET per device (:mod:`chakra.xla.convert`) are built; loops,
profiles, the fidelity check and ``chakra convert xla`` are not yet."""
