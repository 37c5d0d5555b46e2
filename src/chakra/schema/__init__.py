"""The Chakra ET schema (``et_def.proto``) and its generated Python module."""
