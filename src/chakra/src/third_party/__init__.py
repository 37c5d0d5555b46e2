"""Upstream-compatible import paths."""
