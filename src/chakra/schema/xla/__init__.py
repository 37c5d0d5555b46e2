"""Generated protobuf code for ``hlo_subset.proto``: the part of XLA's HloModuleProto the XLA front end reads."""
