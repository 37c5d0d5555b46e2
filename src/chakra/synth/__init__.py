"""Synthetic workloads learned from real ones: ``fit`` a model, ``sample`` workloads from it, compare
them (``fidelity``). See :mod:`chakra.synth.model` for what the model holds."""
