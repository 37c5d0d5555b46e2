"""Workload generators: microbenchmarks (``micro``) and parametric model workloads."""
