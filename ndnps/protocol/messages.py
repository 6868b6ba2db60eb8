"""What the Data of each exchange carry, encoded and checked in one place.

Tensors travel as one flat float32 vector in the codec's blob (msgpack header + raw bytes);
small control answers are msgpack maps.  Every parser raises CodecError on anything malformed,
truncated or inconsistent (wrong size, wrong step/version, non-finite numbers), so a bad Data
is counted and refetched, never applied.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ndnps.ndn import summable
from ndnps.ndn.conventions import SEGMENT_SIZE

from .codec import CodecError, decode_tensors, encode_tensors, pack, tensor_pieces, unpack

# ---- task assignment (step 2) -----------------------------------------------------------------


# the reason a worker gives when the PS re-offers the task it is still running
ALREADY_ASSIGNED = "already assigned"


def task_reply(accept: bool, reason: str = "") -> bytes:
    return pack({"accept": bool(accept), "reason": str(reason)})


def parse_task_reply(buf: bytes) -> tuple[bool, str]:
    msg = unpack(buf)
    if not isinstance(msg, dict) or not isinstance(msg.get("accept"), bool):
        raise CodecError("bad task reply")
    return msg["accept"], str(msg.get("reason", ""))


# ---- training content (step 3) ----------------------------------------------------------------

CONTENT_KEYS = ("ps", "train", "gpu", "index", "workers", "mode", "push_mode", "model_spec",
                "param_spec", "dataset", "dataset_kwargs", "seed", "batch", "steps_per_epoch",
                "total_steps", "hyper", "knobs")


def content_blob(params: np.ndarray, info: dict[str, Any]) -> bytes:
    return encode_tensors([np.asarray(params, np.float32)], kind="content", **info)


class Refused(Exception):
    """The PS answered a content Interest with a refusal: it did not take this worker."""


def refusal_blob(reason: str) -> bytes:
    """What the PS serves under the content name of a worker it did not take (one whose
    acceptance failed its signature check): with another key the worker cannot verify it,
    which tells it its key differs; with the same key, it says why."""
    return encode_tensors([], kind="refused", reason=str(reason))


def parse_content(blob: bytes) -> tuple[np.ndarray, dict[str, Any]]:
    """The training content; raises Refused for a refusal (refusal_blob)."""
    tensors, meta = decode_tensors(blob)
    if meta.get("kind") == "refused":
        raise Refused(str(meta.get("reason", "")))
    if meta.get("kind") != "content" or any(k not in meta for k in CONTENT_KEYS):
        raise CodecError("bad training content header")
    vec = _one_vector(tensors, None)
    n = sum(int(np.prod(shape)) for _, shape in meta["param_spec"])
    if vec.size != n:
        raise CodecError(f"content carries {vec.size} parameters, spec says {n}")
    return vec, meta


# ---- parameters (steps 6, 9 and the unicast baseline) -----------------------------------------


@dataclass
class Params:
    version: int
    vector: np.ndarray
    done: bool
    collected: dict[str, int]  # async: each worker's last step the PS has collected
    aborted: bool = False      # done because the PS was stopped, not because training ended


def params_blob(vector: np.ndarray, version: int, done: bool,
                collected: dict[str, int] | None = None, aborted: bool = False) -> bytes:
    return b"".join(params_pieces(vector, version, done, collected, aborted))


def params_pieces(vector: np.ndarray, version: int, done: bool,
                  collected: dict[str, int] | None = None,
                  aborted: bool = False) -> list[bytes | memoryview]:
    """``params_blob`` as pieces (codec.tensor_pieces): the vector's own memory, not a copy."""
    return tensor_pieces([np.asarray(vector, np.float32)], kind="params", version=int(version),
                         done=bool(done or aborted), collected=dict(collected or {}),
                         aborted=bool(aborted))


def parse_params(blob: bytes, n_params: int, version: int) -> Params:
    tensors, meta = decode_tensors(blob)
    if meta.get("kind") != "params" or meta.get("version") != version:
        raise CodecError(f"not parameters version {version}")
    collected = meta.get("collected", {})
    if not isinstance(collected, dict) or not all(
            isinstance(k, str) and isinstance(v, int) for k, v in collected.items()):
        raise CodecError("bad collected map")
    return Params(version, _one_vector(tensors, n_params), bool(meta.get("done", False)),
                  collected, bool(meta.get("aborted", False)))


# ---- gradients (step 5) -----------------------------------------------------------------------


@dataclass
class Gradient:
    step: int
    base_version: int          # parameter version it was computed on
    vector: np.ndarray
    loss: float
    compute: float             # seconds the worker spent computing it
    # what the worker saw of base_version's push (exchanges.transport.push_rate.PushReport's wire
    # form; read there: anything malformed is ignored, never an error of the gradient)
    push: object = None


def gradient_blob(vector: np.ndarray, step: int, base_version: int, loss: float,
                  compute: float, push: dict | None = None) -> bytes:
    return b"".join(gradient_pieces(vector, step, base_version, loss, compute, push))


def gradient_pieces(vector: np.ndarray, step: int, base_version: int, loss: float,
                    compute: float, push: dict | None = None) -> list[bytes | memoryview]:
    """``gradient_blob`` as pieces (codec.tensor_pieces): the vector's own memory."""
    extra = {} if push is None else {"push": push}
    return tensor_pieces([np.asarray(vector, np.float32)], kind="gradient", step=int(step),
                         base_version=int(base_version), loss=float(loss),
                         compute=float(compute), **extra)


def parse_gradient(blob: bytes, n_params: int, step: int) -> Gradient:
    tensors, meta = decode_tensors(blob)
    if meta.get("kind") != "gradient" or meta.get("step") != step:
        raise CodecError(f"not the gradient of step {step}")
    base = meta.get("base_version")
    if not isinstance(base, int) or base < 0:
        raise CodecError("bad base_version")
    return Gradient(step, base, _one_vector(tensors, n_params), float(meta.get("loss", 0.0)),
                    float(meta.get("compute", 0.0)), meta.get("push"))


# ---- gradients for in-network aggregation (docs/aggregation.md) -------------------------------
#
# With aggregation on, a gradient of step s is segment 0, a small header (GradientMeta: what
# the PS wants of each worker — base version, loss, compute time, push report — and how many
# value segments follow), then segments 1..S, the flat float32 vector cut into summable
# segments (ndnps.ndn.summable) of summable_values(...) values each: a forwarder adds segment i
# of every worker without reading anything else, and the PS asks for the sums.
#
# A segment's sum must fit one Data too. The PS's is float32, as the workers' values; but with
# sub-groups (aggregate_via) a sub-group's partial sum travels exact, 8 octets a value: then a
# segment holds half as many values, so that every segment's Content — a worker's, a sum, an
# exact partial sum — stays within SEGMENT_SIZE, the envelope every Data of the protocol has.

SUMMABLE_VALUES = (SEGMENT_SIZE - summable.HEADER_SIZE) // 4       # 1997: a segment each
SUMMABLE_VALUES_EXACT = (SEGMENT_SIZE - summable.HEADER_SIZE) // 8  # 998: exact sums fit too


def summable_values(partial_sums: bool) -> int:
    """Values per summable segment: fewer when partial sums cross a wire (the training has
    aggregate_via: their exact values take 8 octets each)."""
    return SUMMABLE_VALUES_EXACT if partial_sums else SUMMABLE_VALUES


@dataclass
class GradientMeta:
    step: int
    base_version: int
    loss: float
    compute: float
    segments: int              # value segments after this one (1..segments)
    push: object = None        # as Gradient.push


def gradient_parts(vector: np.ndarray, step: int, base_version: int, loss: float,
                   compute: float, push: dict | None = None, *, per: int) -> list[bytes]:
    """The segments' contents of an aggregatable gradient: the header, then the values,
    `per` a segment (summable_values)."""
    v = np.asarray(vector, np.float32).reshape(-1)
    values = [summable.encode(v[i:i + per])
              for i in range(0, v.size, per)] or [summable.encode(v)]
    extra = {} if push is None else {"push": push}
    head = encode_tensors([], kind="gradient-meta", step=int(step),
                          base_version=int(base_version), loss=float(loss),
                          compute=float(compute), segments=len(values), **extra)
    return [head, *values]


def value_segments(n_params: int, per: int) -> int:
    """How many value segments an aggregatable gradient of `n_params` values has, `per` a
    segment."""
    return max(1, -(-n_params // per))


def parse_gradient_meta(blob: bytes | memoryview, n_params: int, step: int,
                        per: int) -> GradientMeta:
    tensors, meta = decode_tensors(blob)
    if meta.get("kind") != "gradient-meta" or meta.get("step") != step or tensors:
        raise CodecError(f"not the gradient header of step {step}")
    base, segments = meta.get("base_version"), meta.get("segments")
    if not isinstance(base, int) or base < 0:
        raise CodecError("bad base_version")
    if segments != value_segments(n_params, per):
        raise CodecError(f"{segments} value segments, the model needs "
                         f"{value_segments(n_params, per)}")
    return GradientMeta(step, base, float(meta.get("loss", 0.0)),
                        float(meta.get("compute", 0.0)), segments, meta.get("push"))


def _one_vector(tensors, n: int | None) -> np.ndarray:
    if not isinstance(tensors, list) or len(tensors) != 1:
        raise CodecError("expected exactly one tensor")
    vec = tensors[0]
    if vec.dtype != np.float32 or vec.ndim != 1 or (n is not None and vec.size != n):
        raise CodecError(f"expected a float32 vector of {n}, got {vec.dtype} {vec.shape}")
    # a finite sum says every value is finite, in one pass and no temporary array; a sum that
    # overflowed (large finite values) is looked at value by value
    with np.errstate(over="ignore", invalid="ignore"):
        total = vec.sum()
    if not np.isfinite(total) and not np.isfinite(vec).all():
        raise CodecError("non-finite values")
    return vec
