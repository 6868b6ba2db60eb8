"""Synthetic gradients: a stand-in for a model's forward and backward pass, for runs that study
the network rather than the learning (a simulation of a thousand workers in one process).

The vector has the model's parameter count in float32, so the same bytes travel; its values are
one small constant per (worker, step): deterministic, finite, and small enough that the update
keeps the parameters finite over any run's length (|value| <= SCALE), and cheap (one fill).
The loss of such a step is NaN: no loss was computed (a metrics line writes it as null).
"""
from __future__ import annotations

import zlib

import numpy as np

SCALE = 1e-3            # the largest |value|: lr × SCALE per step moves no parameter far
LOSS = float("nan")     # the loss a synthetic step reports


def synthetic_gradient(n_params: int, step: int, who: str) -> np.ndarray:
    """`n_params` float32 values, the same for the same `step` and `who`, within ±SCALE."""
    h = zlib.crc32(f"{who}/{step}".encode())
    return np.full(n_params, SCALE * ((h % 2001) - 1000) / 1000, np.float32)
