"""Generated protobuf code for ``strategy.proto``: FlexFlow's protobuf strategy file (2019-2021)."""
