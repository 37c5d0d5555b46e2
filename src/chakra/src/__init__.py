"""Upstream-compatible import paths (``chakra.src.third_party.utils.protolib``)."""
