"""The TensorFlow front end (issue 17): a worker's steps recorded (``collect``, the only module that
imports TensorFlow), read back and converted to one ET per device (``chakra convert tensorflow``)."""
