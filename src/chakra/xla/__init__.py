"""The XLA front end: JAX and TensorFlow (XLA) programs as Chakra ETs. Partial (issue 16): the module
reader (:mod:`chakra.xla.hlo`), the cost model (:mod:`chakra.xla.costs`) and the conversion of an
SPMD module into one ET per device, loops of known trip count unrolled (:mod:`chakra.xla.convert`,
``chakra convert xla``) are built; profiles (durations), the fidelity check, collecting from a
running job and TensorFlow dumps are not yet."""
