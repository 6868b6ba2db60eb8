import numpy as np
import pytest

from ndnps.protocol.codec import decode_tensors, encode_tensors, pack, unpack
from ndnps.ml.models import MLP, SGD, SoftmaxRegression, build_model, model_spec


def _batch(n=16, n_in=5, n_classes=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n_in)).astype(np.float32), rng.integers(0, n_classes, n)


def _numeric_grad(model, X, y, eps=1e-6):
    out = {}
    for k, p in model.params.items():
        g = np.zeros_like(p)
        for i in np.ndindex(p.shape):
            old = p[i]
            p[i] = old + eps
            lp, _ = model.loss_and_grad(X, y)
            p[i] = old - eps
            lm, _ = model.loss_and_grad(X, y)
            p[i] = old
            g[i] = (lp - lm) / (2 * eps)
        out[k] = g
    return out


@pytest.mark.parametrize("model", [SoftmaxRegression(5, 4, seed=1), MLP(5, [7, 6], 4, seed=1)],
                         ids=["softmax", "mlp"])
def test_gradient_matches_finite_differences(model):
    # Check in float64 so the finite differences are precise; the code runs in the params' dtype.
    model.params = {k: v.astype(np.float64) for k, v in model.params.items()}
    for k in model.params:
        if k.startswith("b"):  # non-zero biases so every bias gradient term is exercised
            model.params[k] += 0.1
    X, y = _batch()
    X = X.astype(np.float64)
    loss, grads = model.loss_and_grad(X, y)
    num = _numeric_grad(model, X, y)
    assert list(grads) == list(model.params)
    for k in grads:
        assert grads[k].shape == model.params[k].shape
        np.testing.assert_allclose(grads[k], num[k], rtol=1e-5, atol=1e-8, err_msg=k)


def test_float32_throughout():
    m = MLP(5, [8], 4, seed=0)
    X, y = _batch()
    loss, grads = m.loss_and_grad(X.astype(np.float64), y)
    assert isinstance(loss, float)
    assert all(v.dtype == np.float32 for v in m.params.values())
    assert all(g.dtype == np.float32 for g in grads.values())


def test_loss_is_stable_for_huge_logits():
    m = SoftmaxRegression(2, 3)
    m.params["W0"][:] = np.array([[1e4, -1e4, 0], [0, 0, 0]], np.float32)
    X = np.array([[10.0, 0.0], [10.0, 0.0]], np.float32)
    loss, grads = m.loss_and_grad(X, np.array([0, 1]))
    assert np.isfinite(loss) and all(np.isfinite(g).all() for g in grads.values())
    assert loss == pytest.approx(0.5 * 2e5, rel=1e-4)  # second sample: -log softmax = 1e5 - (-1e5)


def test_loss_at_uniform_prediction_is_log_k():
    m = SoftmaxRegression(3, 5)
    for p in m.params.values():
        p[:] = 0
    loss, _ = m.loss_and_grad(np.ones((4, 3), np.float32), np.arange(4))
    assert loss == pytest.approx(np.log(5), rel=1e-6)


def test_param_names_order_and_shapes():
    m = MLP(10, [32, 16], 3, seed=0)
    assert list(m.params) == ["W0", "b0", "W1", "b1", "W2", "b2"]
    assert [v.shape for v in m.params.values()] == [(10, 32), (32,), (32, 16), (16,), (16, 3), (3,)]
    assert m.n_params == 10 * 32 + 32 + 32 * 16 + 16 + 16 * 3 + 3
    assert list(SoftmaxRegression(4, 2).params) == ["W0", "b0"]


def test_he_init_scale():
    m = MLP(400, [300], 10, seed=0)
    assert np.std(m.params["W0"]) == pytest.approx(np.sqrt(2 / 400), rel=0.02)
    assert not m.params["b0"].any()


def test_deterministic_given_seed():
    a, b, c = (build_model({"kind": "mlp", "n_in": 6, "hidden": [5], "n_classes": 3}, s) for s in (3, 3, 4))
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
    assert not np.array_equal(a.params["W0"], c.params["W0"])


@pytest.mark.parametrize("spec", [{"kind": "softmax", "n_in": 8, "n_classes": 3},
                                  {"kind": "mlp", "n_in": 8, "hidden": [16, 4], "n_classes": 3}])
def test_spec_round_trip_through_msgpack(spec):
    m = build_model(spec, seed=0)
    assert unpack(pack(model_spec(m))) == spec
    m2 = build_model(unpack(pack(model_spec(m))), seed=0)
    for k in m.params:
        np.testing.assert_array_equal(m.params[k], m2.params[k])


def test_build_model_rejects_unknown_kind():
    with pytest.raises(ValueError):
        build_model({"kind": "cnn", "n_in": 2, "n_classes": 2}, 0)


def test_bad_inputs_raise_value_error():
    m = MLP(5, [4], 3)
    with pytest.raises(ValueError):
        m.loss_and_grad(np.zeros((2, 6), np.float32), np.array([0, 1]))
    with pytest.raises(ValueError):
        m.loss_and_grad(np.zeros((2, 5), np.float32), np.array([0, 3]))
    with pytest.raises(ValueError):
        m.loss_and_grad(np.zeros((2, 5), np.float32), np.array([0, -1]))


def test_load_params_copies_and_validates():
    m = MLP(3, [2], 2, seed=0)
    src = {k: np.full(v.shape, 0.5) for k, v in m.params.items()}
    m.load_params(src)
    assert all(v.dtype == np.float32 and v.flags.writeable for v in m.params.values())
    src["W0"][:] = 9
    assert m.params["W0"][0, 0] == 0.5
    with pytest.raises(ValueError):
        m.load_params({"W0": np.zeros((3, 2))})
    with pytest.raises(ValueError):
        m.load_params({k: np.zeros(1) for k in m.params})


def test_predict_and_accuracy():
    m = SoftmaxRegression(2, 2)
    m.params["W0"][:] = [[1, 0], [0, 1]]
    X = np.array([[2, 0], [0, 2], [3, 1]], np.float32)
    np.testing.assert_array_equal(m.predict(X), [0, 1, 0])
    assert m.accuracy(X, np.array([0, 1, 1])) == pytest.approx(2 / 3)


def test_sgd_matches_hand_computation():
    p = {"w": np.array([1.0, -2.0], np.float32)}
    opt = SGD(lr=0.1, momentum=0.5, weight_decay=0.01)
    v = np.zeros(2)
    w = p["w"].astype(np.float64)
    for g in ([1.0, 1.0], [0.5, -2.0], [0.0, 3.0]):
        opt.step(p, {"w": np.array(g, np.float32)})
        v = 0.5 * v + (np.array(g) + 0.01 * w)
        w = w - 0.1 * v
        np.testing.assert_allclose(p["w"], w, rtol=1e-6)
    assert p["w"].dtype == np.float32


def test_sgd_descends_and_fits_a_batch():
    m = MLP(5, [16], 4, seed=0)
    X, y = _batch(n=32)
    opt = SGD(lr=0.2)
    first, _ = m.loss_and_grad(X, y)
    for _ in range(300):
        loss, g = m.loss_and_grad(X, y)
        opt.step(m.params, g)
    assert loss < 0.1 * first and m.accuracy(X, y) == 1.0


def test_sgd_state_dict_resumes_identically():
    X, y = _batch()
    a, b = MLP(5, [6], 4, seed=2), MLP(5, [6], 4, seed=2)
    oa, ob = SGD(0.1, 0.9, 1e-3), SGD(0.5)
    for _ in range(3):
        oa.step(a.params, a.loss_and_grad(X, y)[1])
    b.load_params(a.params)
    # Checkpoint path: scalars via msgpack, velocity via the tensor codec.
    sd = oa.state_dict()
    blob = encode_tensors(sd.pop("velocity"))
    ob.load_state_dict({**unpack(pack(sd)), "velocity": decode_tensors(blob)[0]})
    for _ in range(3):
        oa.step(a.params, a.loss_and_grad(X, y)[1])
        ob.step(b.params, b.loss_and_grad(X, y)[1])
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
    # state_dict is a snapshot, not a live view.
    sd = oa.state_dict()
    sd["velocity"]["W0"][:] = 123
    assert not (oa.velocity["W0"] == 123).any()


def test_sgd_rejects_mismatched_grads():
    with pytest.raises(ValueError):
        SGD(0.1).step({"w": np.zeros(2, np.float32)}, {"v": np.zeros(2, np.float32)})
    with pytest.raises(ValueError):
        SGD(0.1).step({"w": np.zeros(2, np.float32)}, {"w": np.zeros(3, np.float32)})
