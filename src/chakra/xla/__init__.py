"""The XLA front end: JAX and TensorFlow (XLA) programs as Chakra ETs. Partial (issue 16): recording a
JAX step (:mod:`chakra.xla.collect`), reading modules (:mod:`chakra.xla.hlo`), the cost model
(:mod:`chakra.xla.costs`), the conversion of an SPMD module into one ET per device with loops of
known trip count unrolled (:mod:`chakra.xla.convert`), measured times from a JAX profile
(:mod:`chakra.xla.profile`) and the fidelity check (``chakra convert xla --profile --check``) are
built, and read TensorFlow's XLA dumps too; async collectives overlapping compute are not modelled yet."""
