import json
import time

import numpy as np
import pytest

from ndnps.ml.data import Dataset, batches, load_dataset, shard
from ndnps.ml.models import SGD, build_model
from ndnps.ml.train import (DEFAULTS, WorkerBatches, average_grads, main, steps_per_epoch,
                         train_sync_reference, worker_step_batches)

MLP64 = {"kind": "mlp", "hidden": [64]}


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", seed=0)


def _run(ds, spec=MLP64, **kw):
    args = {k: DEFAULTS[k] for k in ("workers", "epochs", "batch", "lr", "momentum", "weight_decay", "seed")}
    args.update(kw)
    return train_sync_reference(ds, spec, **args)


def test_digits_mlp_defaults_reach_95_percent(digits):
    t0 = time.perf_counter()
    res = _run(digits)
    assert time.perf_counter() - t0 < 20
    assert res["final_accuracy"] >= 0.95
    assert res["steps_per_epoch"] == 10  # 1347 // 4 // 32
    losses = [h["loss"] for h in res["history"]]
    assert len(losses) == DEFAULTS["epochs"] and losses[-1] < 0.2 * losses[0]
    assert res["history"][-1]["test_acc"] == res["final_accuracy"]


def test_one_worker_equals_plain_sgd(digits):
    seed, batch, epochs = 3, 32, 2
    res = _run(digits, workers=1, epochs=epochs, batch=batch, seed=seed, weight_decay=1e-4)

    model = build_model({"n_in": 64, "n_classes": 10, **MLP64}, seed)
    opt = SGD(DEFAULTS["lr"], DEFAULTS["momentum"], 1e-4)
    for e in range(epochs):
        for X, y in batches(digits.X_train, digits.y_train, batch, e, (seed, 0)):
            opt.step(model.params, model.loss_and_grad(X, y)[1])
    for k, v in model.params.items():
        np.testing.assert_array_equal(res["params"][k], v, err_msg=k)


def test_n_workers_equal_one_big_batch(digits):
    """Averaging N equal-size minibatch gradients is the gradient of their union."""
    workers, batch, seed = 3, 16, 1
    res = _run(digits, workers=workers, epochs=1, batch=batch, seed=seed)

    model = build_model({"n_in": 64, "n_classes": 10, **MLP64}, seed)
    opt = SGD(DEFAULTS["lr"], DEFAULTS["momentum"])
    feeds = [WorkerBatches(digits, workers, w, batch, seed) for w in range(workers)]
    for step in range(feeds[0].steps_per_epoch):
        parts = [f.for_step(step) for f in feeds]
        X = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        opt.step(model.params, model.loss_and_grad(X, y)[1])
    for k, v in model.params.items():
        np.testing.assert_allclose(res["params"][k], v, rtol=1e-4, atol=1e-5, err_msg=k)


def test_reference_is_deterministic_and_seeded(digits):
    a = _run(digits, epochs=2)
    b = _run(digits, epochs=2)
    c = _run(digits, epochs=2, seed=1)
    assert a["history"] == b["history"]
    for k in a["params"]:
        np.testing.assert_array_equal(a["params"][k], b["params"][k])
    assert not np.array_equal(a["params"]["W0"], c["params"]["W0"])


@pytest.mark.parametrize("n,workers,batch", [(1347, 4, 32), (1347, 3, 10), (103, 5, 4), (64, 1, 64)])
def test_steps_per_epoch_is_min_over_shards(n, workers, batch):
    expected = min(len(shard(n, workers, w, 0)) // batch for w in range(workers))
    assert steps_per_epoch(n, workers, batch) == expected


def _indexed_dataset(n: int) -> Dataset:
    """Row i holds the value i, so every batch tells which samples it took."""
    X = np.arange(n, dtype=np.float32)[:, None]
    return Dataset(X, np.arange(n), X[:1], np.zeros(1, np.int64), 1, n)


def test_worker_batches_come_from_own_shard_and_match_iterator():
    n, workers, batch, seed = 1000, 3, 16, 5
    ds = _indexed_dataset(n)
    feeds = [WorkerBatches(ds, workers, w, batch, seed) for w in range(workers)]
    spe = feeds[0].steps_per_epoch
    assert spe == (n // workers) // batch
    for epoch in range(2):
        taken = []
        for w, f in enumerate(feeds):
            own = set(shard(n, workers, w, seed).tolist())
            it = list(worker_step_batches(ds, workers, w, batch, epoch, seed))
            assert len(it) == spe
            for i, (X, y) in enumerate(it):
                Xs, ys = f.for_step(epoch * spe + i)
                np.testing.assert_array_equal(X, Xs)
                np.testing.assert_array_equal(y, ys)
                np.testing.assert_array_equal(X[:, 0], y)  # rows stay paired with labels
            ids = np.concatenate([y for _, y in it]).tolist()
            assert set(ids) <= own and len(set(ids)) == len(ids) == spe * batch
            taken.append(set(ids))
        assert not (taken[0] & taken[1]) and not (taken[1] & taken[2])
    # each worker reshuffles every epoch
    assert not np.array_equal(feeds[0].for_step(0)[1], feeds[0].for_step(spe)[1])
    with pytest.raises(IndexError):
        feeds[0].get(0, spe)


def test_too_few_samples_for_a_batch(digits):
    with pytest.raises(ValueError):
        WorkerBatches(digits, 64, 0, 32, 0)


def test_average_grads_in_order_and_float32():
    g = [{"w": np.array([1.0, 2.0], np.float32)}, {"w": np.array([3.0, 6.0], np.float32)},
         {"w": np.array([2.0, 1.0], np.float32)}]
    avg = average_grads(g)
    np.testing.assert_allclose(avg["w"], [2.0, 3.0])
    assert avg["w"].dtype == np.float32
    np.testing.assert_array_equal(g[0]["w"], [1.0, 2.0])  # inputs untouched
    with pytest.raises(ValueError):
        average_grads([])


def test_spec_must_fit_dataset(digits):
    with pytest.raises(ValueError):
        _run(digits, spec={"kind": "softmax", "n_in": 10}, epochs=1)


def test_cli_prints_epochs_then_json(capsys):
    assert main(["--dataset", "digits", "--model", "softmax", "--epochs", "3", "--workers", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and lines[0].startswith("epoch   1")
    last = json.loads(lines[-1])
    assert last["workers"] == 2 and last["model_spec"]["kind"] == "softmax"
    assert 0.5 < last["final_accuracy"] <= 1.0


def test_cli_synthetic(capsys):
    assert main(["--dataset", "synthetic", "--n-samples", "2000", "--n-features", "16",
                 "--n-classes", "4", "--epochs", "2", "--hidden", "32", "16"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["model_spec"] == {"n_in": 16, "n_classes": 4, "kind": "mlp", "hidden": [32, 16]}
