"""Generated protobuf code for ``et_def.proto``; import path shared with upstream Chakra."""
