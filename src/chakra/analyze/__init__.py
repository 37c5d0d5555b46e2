"""Analyses of traces: one module per analysis, plain functions over a trace or its nodes."""
