"""Micro-benchmarks: one hot path at a time, in process, for optimisation work (unregistered)."""
