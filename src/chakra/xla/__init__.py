"""The XLA front end: JAX and TensorFlow (XLA) programs as Chakra ETs. Partial: the module reader
(:mod:`chakra.xla.hlo`) is built; the converter, costs, profiles and the CLI are not yet (issue 16)."""
