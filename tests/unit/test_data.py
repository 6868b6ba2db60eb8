import subprocess
import sys

import numpy as np
import pytest

from ndnps.ml.data import Dataset, batches, epoch_order, load_dataset, shard


def _same(a: Dataset, b: Dataset) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("X_train", "y_train", "X_test", "y_test"))


def test_digits_shape_scale_and_split():
    ds = load_dataset("digits", seed=0)
    assert (ds.n_features, ds.n_classes) == (64, 10)
    assert len(ds.X_train) + len(ds.X_test) == 1797
    assert len(ds.X_test) == 450  # 25 %
    assert ds.X_train.dtype == np.float32 and ds.y_train.dtype == np.int64
    assert ds.X_test.dtype == np.float32 and ds.y_test.dtype == np.int64
    assert ds.X_train.min() == 0.0 and ds.X_train.max() == 1.0
    # stratified: every class's share in the test set is within one sample of 25 %
    for c in range(10):
        n_c = (ds.y_train == c).sum() + (ds.y_test == c).sum()
        assert abs((ds.y_test == c).sum() - 0.25 * n_c) <= 1


def test_digits_deterministic_per_seed():
    assert _same(load_dataset("digits", 0), load_dataset("digits", 0))
    assert not _same(load_dataset("digits", 0), load_dataset("digits", 1))


@pytest.mark.parametrize("test_size", [0.25, 0.1, 0.5])
def test_digits_are_scikit_learns_arrays_split_stratified(test_size):
    """Read without importing scikit-learn, yet load_digits()'s rows; the split a partition
    of them, stratified, and the same in every process for a seed."""
    from sklearn.datasets import load_digits
    d = load_digits()
    X = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    rows = {(bytes(x), int(c)) for x, c in zip(X, y)}
    for seed in range(6):
        ds = load_dataset("digits", seed, test_size=test_size)
        got = [(bytes(x), int(c)) for x, c in zip(np.concatenate([ds.X_train, ds.X_test]),
                                                  np.concatenate([ds.y_train, ds.y_test]))]
        assert len(got) == len(y) and set(got) == rows
        assert len(ds.y_test) == int(np.ceil(test_size * len(y)))
        for c in range(10):                      # each class cut within one row of its share
            assert abs((ds.y_test == c).sum() - test_size * (y == c).sum()) < 1
        assert _same(ds, load_dataset("digits", seed, test_size=test_size))


def test_loading_the_digits_imports_no_scikit_learn():
    code = ("import sys; from ndnps.ml.data import load_dataset; load_dataset('digits', 0); "
            "assert 'sklearn' not in sys.modules and 'scipy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_synthetic_configurable_deterministic_and_balanced():
    ds = load_dataset("synthetic", seed=3, n_samples=2000, n_features=20, n_classes=5)
    assert (ds.n_features, ds.n_classes) == (20, 5)
    assert ds.X_train.shape == (1600, 20) and ds.X_test.shape == (400, 20)
    assert ds.X_train.dtype == np.float32 and ds.y_train.dtype == np.int64
    counts = np.bincount(np.concatenate([ds.y_train, ds.y_test]), minlength=5)
    assert counts.min() > 0.5 * 2000 / 5
    assert _same(ds, load_dataset("synthetic", seed=3, n_samples=2000, n_features=20, n_classes=5))
    assert not _same(ds, load_dataset("synthetic", seed=4, n_samples=2000, n_features=20, n_classes=5))


def test_synthetic_is_learnable():
    from ndnps.ml.models import SGD, SoftmaxRegression

    ds = load_dataset("synthetic", seed=0, n_samples=4000, n_features=10, n_classes=3)
    m, opt = SoftmaxRegression(10, 3, seed=0), SGD(0.1)
    for epoch in range(5):
        for X, y in batches(ds.X_train, ds.y_train, 32, epoch, 0):
            opt.step(m.params, m.loss_and_grad(X, y)[1])
    assert m.accuracy(ds.X_test, ds.y_test) > 0.9


def test_unknown_dataset_and_kwargs():
    with pytest.raises(ValueError):
        load_dataset("mnist", 0)
    with pytest.raises(TypeError):
        load_dataset("digits", 0, n_samples=10)


@pytest.mark.parametrize("n,k", [(1347, 4), (10, 3), (7, 7), (100, 1), (5, 8)])
def test_shards_partition_and_balance(n, k):
    parts = [shard(n, k, i, seed=0) for i in range(k)]
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(n))
    sizes = [len(p) for p in parts]
    assert min(sizes) == n // k and max(sizes) - min(sizes) <= 1
    assert all(p.dtype.kind == "i" and np.all(np.diff(p) > 0) for p in parts)


def test_shard_deterministic_and_seeded():
    assert np.array_equal(shard(1000, 4, 2, 7), shard(1000, 4, 2, 7))
    assert not np.array_equal(shard(1000, 4, 2, 7), shard(1000, 4, 2, 8))
    # not simply contiguous ranges: each shard spreads over the whole data set
    s = shard(1000, 4, 0, 0)
    assert s.min() < 100 and s.max() > 900


@pytest.mark.parametrize("index,k", [(4, 4), (-1, 4), (0, 0)])
def test_shard_bad_index(index, k):
    with pytest.raises(ValueError):
        shard(10, k, index, 0)


def test_batches_cover_epoch_and_reshuffle():
    X = np.arange(100, dtype=np.float32).reshape(50, 2)
    y = np.arange(50)
    ep0 = list(batches(X, y, 8, epoch=0, seed=1))
    assert len(ep0) == 6 and all(len(b[1]) == 8 for b in ep0)  # 50 // 8, last 2 dropped
    seen = np.concatenate([b[1] for b in ep0])
    assert len(set(seen)) == 48
    for Xb, yb in ep0:
        np.testing.assert_array_equal(Xb[:, 0], 2 * yb)  # rows stay paired with labels
    again = list(batches(X, y, 8, epoch=0, seed=1))
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(ep0, again))
    ep1 = np.concatenate([b[1] for b in batches(X, y, 8, epoch=1, seed=1)])
    assert not np.array_equal(seen, ep1)
    other_seed = np.concatenate([b[1] for b in batches(X, y, 8, epoch=0, seed=2)])
    assert not np.array_equal(seen, other_seed)


def test_batches_keep_last_and_tuple_seed():
    X, y = np.zeros((10, 1), np.float32), np.arange(10)
    sizes = [len(b) for _, b in batches(X, y, 4, 0, (0, 1), drop_last=False)]
    assert sizes == [4, 4, 2]
    order = np.concatenate([b for _, b in batches(X, y, 4, 0, (0, 1), drop_last=False)])
    np.testing.assert_array_equal(order, epoch_order(10, 0, (0, 1)))
    # worker 0 and worker 1 get different orders; trailing zeros in the seed tuple still matter
    assert not np.array_equal(epoch_order(100, 0, (5, 0)), epoch_order(100, 0, (5, 1)))
    assert not np.array_equal(epoch_order(100, 0, (5, 0)), epoch_order(100, 0, 5))


def test_the_streams_draw_what_they_always_drew():
    """Each purpose's stream number is part of its draws: shards, batch orders and the synthetic
    data stay those of every earlier run (a renumbering would change them all)."""
    assert shard(20, 3, 1, 7).tolist() == [2, 4, 5, 7, 10, 16, 18]
    assert epoch_order(10, 2, (5, 1)).tolist() == [1, 3, 8, 0, 6, 7, 9, 2, 4, 5]
    ds = load_dataset("synthetic", 3, n_samples=50, n_features=4, n_classes=3)
    assert ds.y_train[:12].tolist() == [1, 0, 2, 1, 2, 0, 1, 2, 0, 0, 2, 0]
    assert np.allclose(ds.X_train[0], [0.55889, -0.15464, -1.263974, 1.098052], atol=1e-6)
