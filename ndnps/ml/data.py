"""Datasets, shard assignment and deterministic minibatches.

Data never travels: a worker is told (dataset name, seed, shard count, shard index), loads the
dataset locally and derives exactly the same indices as every other process.
"""

from __future__ import annotations

import gzip
import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

__all__ = ["Dataset", "load_dataset", "shard", "epoch_order", "batches"]

# Independent random streams per purpose, all derived from the one user seed. Their numbers
# are part of every draw: kept as they are (1 was a split's, no longer drawn from).
_SHARD, _BATCH, _SYNTH = 2, 3, 4


def _rng(*key: int) -> np.random.Generator:
    # Length prefix: SeedSequence ignores trailing zeros, so [s, 0] would equal [s] otherwise.
    return np.random.default_rng([len(key), *key])


@dataclass(frozen=True)
class Dataset:
    X_train: np.ndarray  # float32 (n_train, n_features)
    y_train: np.ndarray  # int64 (n_train,)
    X_test: np.ndarray
    y_test: np.ndarray
    n_features: int
    n_classes: int
    name: str = ""


def _digits(seed: int, test_size: float = 0.25) -> Dataset:
    X, y = _digits_arrays()
    train, test = _stratified_split(y, test_size, seed)
    return Dataset(X[train], y[train], X[test], y[test], X.shape[1], 10, "digits")


def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The digits bundled with scikit-learn (no download), pixels scaled to [0, 1]: read from
    its CSV without importing scikit-learn, whose import (scipy.stats among it) costs every
    process that loads the data ~2 s of CPU; load_digits() when the file is not where we look."""
    spec = importlib.util.find_spec("sklearn")
    where = spec.submodule_search_locations if spec is not None else None
    path = Path(where[0]) / "datasets" / "data" / "digits.csv.gz" if where else None
    if path is not None and path.is_file():
        with gzip.open(path, "rt") as f:
            data = np.loadtxt(f, delimiter=",")
        X, y = data[:, :-1], data[:, -1].astype(int)
    else:
        from sklearn.datasets import load_digits
        d = load_digits()
        X, y = d.data, d.target
    return (X / 16.0).astype(np.float32), y.astype(np.int64)  # pixel counts 0..16 -> [0, 1]


def _stratified_split(y: np.ndarray, test_size: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) row indices, stratified: each class's rows shuffled by `seed` and cut in
    the whole set's proportion — ceil(test_size x n) test rows, spread over the classes by
    their counts, the rows left by rounding down going to the largest remainders (ties to the
    lower label) — then each set shuffled again. Every process derives the same split from
    (y, test_size, seed), with nothing but numpy."""
    rng = np.random.default_rng(seed)
    n_test = math.ceil(test_size * len(y))
    classes, counts = np.unique(y, return_counts=True)
    share = counts * n_test / len(y)
    per_class = np.floor(share).astype(np.int64)
    left = n_test - int(per_class.sum())
    per_class[np.argsort(per_class - share, kind="stable")[:left]] += 1
    train, test = [], []
    for c, k in zip(classes, per_class):
        rows = rng.permutation(np.flatnonzero(y == c))
        test.append(rows[:k])
        train.append(rows[k:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def _synthetic(seed: int, n_samples: int = 10000, n_features: int = 100, n_classes: int = 10,
               test_size: float = 0.2, label_noise: float = 0.0) -> Dataset:
    """Gaussian inputs labelled by a random linear teacher: learnable to ~100% (less label_noise)."""
    rng = _rng(_SYNTH, seed)
    X = rng.standard_normal((n_samples, n_features), dtype=np.float32)
    W = rng.standard_normal((n_features, n_classes), dtype=np.float32)
    W /= np.linalg.norm(W, axis=0)  # equal column norms -> roughly balanced classes
    y = (X @ W).argmax(axis=1).astype(np.int64)
    flip = rng.random(n_samples) < label_noise
    y[flip] = rng.integers(0, n_classes, flip.sum())
    n_test = int(round(n_samples * test_size))
    n_train = n_samples - n_test  # rows are i.i.d., so a plain cut is a random split
    return Dataset(X[:n_train], y[:n_train], X[n_train:], y[n_train:], n_features, n_classes, "synthetic")


_LOADERS: dict[str, Callable[..., Dataset]] = {"digits": _digits, "synthetic": _synthetic}


def load_dataset(name: str, seed: int, **kw) -> Dataset:
    """``digits`` (kw: test_size) or ``synthetic`` (kw: n_samples, n_features, n_classes,
    test_size, label_noise); the same (name, seed, kw) always gives the same arrays."""
    try:
        loader = _LOADERS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; choose from {sorted(_LOADERS)}") from None
    return loader(seed, **kw)


def shard(n: int, num_shards: int, index: int, seed: int) -> np.ndarray:
    """Sorted indices of shard ``index`` out of ``num_shards`` over ``n`` samples.

    A seeded permutation cut into near-equal parts (sizes differ by at most one, the smallest
    is ``n // num_shards``); the shards are disjoint and cover range(n).
    """
    if num_shards < 1 or not 0 <= index < num_shards:
        raise ValueError(f"bad shard {index} of {num_shards}")
    perm = _rng(_SHARD, num_shards, seed).permutation(n)
    return np.sort(np.array_split(perm, num_shards)[index])


def epoch_order(n: int, epoch: int, seed: int | Sequence[int]) -> np.ndarray:
    """The permutation of range(n) that batches() walks in ``epoch``; ``seed`` may be a tuple
    such as (seed, worker_index) to give each worker its own order."""
    key = (seed,) if isinstance(seed, (int, np.integer)) else tuple(seed)
    return _rng(_BATCH, epoch, *key).permutation(n)


def batches(X: np.ndarray, y: np.ndarray, batch_size: int, epoch: int,
            seed: int | Sequence[int], drop_last: bool = True) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Minibatches of one epoch, in the order epoch_order(len(X), epoch, seed)."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    perm = epoch_order(len(X), epoch, seed)
    stop = len(perm) - len(perm) % batch_size if drop_last else len(perm)
    for i in range(0, stop, batch_size):
        idx = perm[i:i + batch_size]
        yield X[idx], y[idx]
