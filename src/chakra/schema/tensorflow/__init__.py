"""Generated protobuf code for ``tf_subset.proto``: the part of TensorFlow's RunMetadata, GraphDef and
profiler XSpace that the TensorFlow front end reads."""
