"""Simulation of Chakra workloads with ASTRA-sim's semantics: configuration files, network, collectives, engine."""
