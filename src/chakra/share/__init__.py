"""Sharing traces safely (issue 19): :mod:`~chakra.share.anonymize` strips what is proprietary from a
workload and :mod:`~chakra.share.leakage` proves no string of the input is left in the output;
:mod:`~chakra.share.opclass` gives the coarse operator classes ``--keep-op-kinds`` keeps."""
