"""numpy classifiers (float32) and the SGD optimizer the PS applies.

Both models are dense nets ``[n_in, *hidden, n_classes]`` with ReLU between layers and a
softmax cross-entropy head; softmax regression is the net with no hidden layer.  Parameters are
an ordered dict ``W0, b0, W1, b1, ...`` so flatten/unflatten and the wire order are fixed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DenseNet", "SoftmaxRegression", "MLP", "SGD", "build_model", "model_spec"]


class DenseNet:
    """Common implementation; use SoftmaxRegression or MLP."""

    kind = "dense"

    def __init__(self, sizes: list[int], seed: int = 0) -> None:
        if len(sizes) < 2 or any(int(s) <= 0 for s in sizes):
            raise ValueError(f"bad layer sizes {sizes}")
        self.sizes = [int(s) for s in sizes]
        rng = np.random.default_rng(seed)
        self.params: dict[str, np.ndarray] = {}
        for i, (fan_in, fan_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            # He init: keeps activation variance steady through ReLU layers.
            scale = np.float32(np.sqrt(2.0 / fan_in))
            self.params[f"W{i}"] = rng.standard_normal((fan_in, fan_out), dtype=np.float32) * scale
            self.params[f"b{i}"] = np.zeros(fan_out, np.float32)

    @property
    def n_in(self) -> int:
        return self.sizes[0]

    @property
    def n_classes(self) -> int:
        return self.sizes[-1]

    @property
    def n_params(self) -> int:
        return sum(p.size for p in self.params.values())

    def load_params(self, params: dict[str, np.ndarray]) -> None:
        """Replace parameters by copies of ``params`` (same names and shapes, cast to float32)."""
        if list(params) != list(self.params):
            raise ValueError(f"parameter names {list(params)} != {list(self.params)}")
        for k, v in params.items():
            if np.shape(v) != self.params[k].shape:
                raise ValueError(f"{k}: shape {np.shape(v)} != {self.params[k].shape}")
        self.params = {k: np.array(v, np.float32) for k, v in params.items()}

    def _forward(self, X: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """Return the inputs of every layer and the logits."""
        n_layers = len(self.sizes) - 1
        # Compute in the parameters' dtype (float32; float64 only in the gradient check).
        h = np.asarray(X, self.params["W0"].dtype)
        if h.ndim != 2 or h.shape[1] != self.n_in:
            raise ValueError(f"X must be (n, {self.n_in}), got {h.shape}")
        acts = []
        for i in range(n_layers):
            acts.append(h)
            h = h @ self.params[f"W{i}"] + self.params[f"b{i}"]
            if i < n_layers - 1:
                h = np.maximum(h, 0)
        return acts, h

    def logits(self, X: np.ndarray) -> np.ndarray:
        return self._forward(X)[1]

    def loss_and_grad(self, X: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
        """Mean softmax cross-entropy over the batch and its gradient w.r.t. every parameter."""
        acts, z = self._forward(X)
        n = z.shape[0]
        y = np.asarray(y)
        if n == 0 or y.shape != (n,):
            raise ValueError(f"need a non-empty batch with y of shape ({n},), got {y.shape}")
        if y.min() < 0 or y.max() >= self.n_classes:  # a negative label would silently wrap
            raise ValueError(f"labels must lie in [0, {self.n_classes})")
        losses, d = softmax_cross_entropy(z, y, n)
        loss = float(np.mean(losses))
        grads: dict[str, np.ndarray] = {}
        for i in reversed(range(len(acts))):
            grads[f"W{i}"] = acts[i].T @ d
            grads[f"b{i}"] = d.sum(axis=0)
            if i > 0:
                d = (d @ self.params[f"W{i}"].T) * (acts[i] > 0)
        return loss, {k: grads[k] for k in self.params}

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.logits(X).argmax(axis=1)

    def accuracy(self, X: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(self.predict(X) == np.asarray(y)))


def softmax_cross_entropy(z: np.ndarray, y: np.ndarray,
                          scale: int) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's softmax cross-entropy of logits `z` against labels `y`, and the gradient
    w.r.t. `z` of their sum ÷ `scale` (the batch's size: of their mean)."""
    rows = np.arange(z.shape[0])
    shifted = z - z.max(axis=1, keepdims=True)  # stable: exp never overflows
    log_norm = np.log(np.exp(shifted).sum(axis=1))
    d = np.exp(shifted - log_norm[:, None])     # softmax probabilities
    d[rows, y] -= 1
    d /= scale
    return log_norm - shifted[rows, y], d


class SoftmaxRegression(DenseNet):
    kind = "softmax"

    def __init__(self, n_in: int, n_classes: int, seed: int = 0) -> None:
        super().__init__([n_in, n_classes], seed)


class MLP(DenseNet):
    kind = "mlp"

    def __init__(self, n_in: int, hidden: list[int], n_classes: int, seed: int = 0) -> None:
        super().__init__([n_in, *hidden, n_classes], seed)

    @property
    def hidden(self) -> list[int]:
        return self.sizes[1:-1]


def build_model(spec: dict[str, Any], seed: int) -> DenseNet:
    """Build a model from a plain (msgpack-able) spec such as model_spec() returns."""
    kind = spec.get("kind")
    if kind == "softmax":
        return SoftmaxRegression(spec["n_in"], spec["n_classes"], seed)
    if kind == "mlp":
        return MLP(spec["n_in"], list(spec.get("hidden", [])), spec["n_classes"], seed)
    raise ValueError(f"unknown model kind {kind!r}")


def model_spec(model: DenseNet) -> dict[str, Any]:
    """The plain dict that build_model() turns back into an equally shaped model."""
    spec: dict[str, Any] = {"kind": model.kind, "n_in": model.n_in, "n_classes": model.n_classes}
    if isinstance(model, MLP):
        spec["hidden"] = model.hidden
    return spec


class SGD:
    """SGD with momentum and L2 weight decay, PyTorch's formulation:
    ``v = momentum * v + (g + wd * p); p -= lr * v``."""

    def __init__(self, lr: float, momentum: float = 0.9, weight_decay: float = 0.0) -> None:
        self.lr, self.momentum, self.weight_decay = float(lr), float(momentum), float(weight_decay)
        self.velocity: dict[str, np.ndarray] = {}

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """Update ``params`` in place."""
        if set(grads) != set(params):
            raise ValueError(f"gradient names {sorted(grads)} != parameter names {sorted(params)}")
        for k, p in params.items():
            g = np.asarray(grads[k], p.dtype)
            if g.shape != p.shape:
                raise ValueError(f"{k}: gradient shape {g.shape} != {p.shape}")
            if self.weight_decay:
                g = g + self.weight_decay * p
            v = self.velocity.get(k)
            if v is None:
                v = self.velocity[k] = np.zeros_like(p)
            v *= self.momentum
            v += g
            p -= self.lr * v

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "momentum": self.momentum, "weight_decay": self.weight_decay,
                "velocity": {k: v.copy() for k, v in self.velocity.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr, self.momentum = float(state["lr"]), float(state["momentum"])
        self.weight_decay = float(state["weight_decay"])
        self.velocity = {k: np.array(v, np.float32) for k, v in state["velocity"].items()}
