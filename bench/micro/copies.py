"""Copies of a segment's bytes per process part, the push path first: a short training in one
process — the real PS and workers (``ndnps.apps.ps``, ``ndnps.apps.worker``) on the unit tests'
in-memory network (``tests.support.memnet``: the real forwarder core, the apps' real client) — with
every buffer big enough to hold a segment counted in the part whose code made it. Not a registered
benchmark: ``bench.cpu`` runs it for its ``copies_per_segment``.

    python -m bench.micro.copies [--json] [--model 100k] [--workers 2] [--versions 5]

What is counted.  A copy of a segment's bytes is written into a buffer at least as big as the
segment, made for it.  Every buffer of at least `threshold` bytes (15/16 of SEGMENT_SIZE)
that malloc, calloc, memalign, aligned_alloc or posix_memalign return, and the part a realloc
adds, is counted, with the bytes written into it: the buffer is filled with a pattern when
made (calloc's: zeros) and read again when freed or when the counters are next read (at every
window's edge); the bytes no longer the pattern were written (a realloc that moves a buffer
wrote its old bytes).  A part's ``copies`` per segment is the bytes written ÷ the bytes of
segment content it handled: a packet made around a segment ~1.02 (its name and signature
too), one join of a whole object's segments 1.0 per segment (one buffer), a view (memoryview,
np.frombuffer, a bytes object passed on as such) 0.  ``allocs_per_segment`` counts the
buffers; ``detail`` gives each window's buffers, their bytes, the bytes written.  Written
rather than allocated: msgpack's packb makes a 256 KiB scratch buffer per call (a header's
few bytes written).

How.  A small LD_PRELOAD library (bench/micro/allocations.py, built with gcc in a temporary
directory at each run) defines those allocation functions and free over glibc's ``__libc_*``;
Python reads its counters through ctypes.  The parent (``--json`` or not) builds it and runs
this module again as a child with ``LD_PRELOAD``, ``PYTHONMALLOC=malloc`` (Python's objects
from malloc too; past 512 bytes they are anyway, as numpy's data) and single-threaded BLAS; the
child's last stdout line is the result, printed again as the parent's last.  Without gcc, or
where the library does not load (no glibc), that line is ``{"error": "<why>"}``, exit 0.

Which part.  The child reads the counters as windows open and close around each part's code;
a window opened inside another is taken out of the outer one's (a packet the PS writes
reaches the forwarder inside the PS's send).  Packets are told apart by their names.

- ``ps``: ``Serving.publish`` (ndnps/apps/ps/serving.py: the parameters flattened into one vector
  — ``detail`` ps.flatten —, the version's pieces, its segments signed — ps.sign) and the
  sending of the push (the pacer's send callable, the face's flush at each drain and at the
  end of a loop turn), per segment published;
- ``forwarder``: ``MemNet.receive`` of a pushed Data (``Forwarder.on_receive``: PIT, persistent
  PIT, CS, a copy out to each worker's face — ``forwarder_copies_out_per_segment`` —, the
  100 ms tick when due), per segment the PS sent;
- ``worker``: a worker face's ``data_received`` of a pushed Data (parse, HMAC check, the
  subscriber's assembly; at a version's last segment the join, worker.join, and the decode to
  numpy, worker.decode), per segment received, over the workers;
- ``worker_model``: the worker's model loading the version it computes on (``load_params``),
  per segment received;
- the collect path, per gradient segment: ``collect_worker`` (the gradient flattened and
  signed in ``ndnps.apps.worker.gradients``, the reads of the PS's collect Interests that answer
  them, the worker face's end-of-turn flushes), ``collect_forwarder`` (``MemNet.receive`` of a
  gradient Data), ``collect_ps`` (the PS face's reads of gradient Data, the collect's join and
  ``parse_gradient``);
- ``framing``: the face's ``StreamFramer`` alone (the apps' and the daemon's) on a version's
  packets read 64 KiB at a time.

Reads and end-of-turn flushes are windowed at the event loop's callbacks
(``asyncio.events.Handle._run``; memnet hands each packet to an app as its own
``data_received``).  What runs outside every window (the model's update, the gradient's
compute, the evaluation, the training content) is not reported.

Limits.  A copy into a buffer that exists already (a bytearray kept, recv_into) is not
counted, nor a buffer's bytes written after the window that made it; bytes written with the
pattern's value (or zeros into calloc's) are missed.  Anything else that big inside a window
is: a temporary (``np.isfinite(v).all()``'s bool array: 0.25 per float32 segment), a table
resized (the CS's dict as it fills).  Only the forwarder's core and the client above its
transport run: memnet hands over one packet per read, which the framer passes on as it is,
whereas a socket's read holds several and the framer copies each out (``framing``); the
kernel's copies and asyncio's or uvloop's transports are not measured.  An object's last
segment is short: its packet may fall under the threshold, its content still counts in the
denominator (~0.02 % low at 50 segments of 100k parameters).
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.micro.allocations import Counter, build_shim  # noqa: E402

KEY = "copies"
GROUPS = ("ps", "forwarder", "worker", "worker_model", "collect_worker", "collect_forwarder",
          "collect_ps")
READ = 64 * 1024                    # a stream read, for `framing` (asyncio's recv size: 256 KiB)

# ---- the windows (the child) -------------------------------------------------------------------



class Parts:
    """Counted buffers by part: each window's own (a nested window's are its own, not the outer
    one's) as [buffers, bytes, bytes written]; segments and content bytes handled, by group (a
    part "group.sub" adds to its group)."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.allocs: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        self.handled: dict[str, list[int]] = defaultdict(lambda: [0, 0])   # group -> segs, bytes
        self._stack: list[list[int]] = []           # open windows: what nested ones took

    def window(self, part: str | Callable[[], str], fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) in a window of `part` (a callable: decided inside the window, so the
        deciding is the part's, not the enclosing window's)."""
        before = self.counter.read()
        nested = [0, 0, 0]
        self._stack.append(nested)
        name = "other"
        try:
            name = part if isinstance(part, str) else part()
            return fn(*args)
        finally:
            self._stack.pop()
            delta = [b - a for a, b in zip(before, self.counter.read())]
            own = self.allocs[name]
            for i in range(3):
                own[i] += delta[i] - nested[i]
                if self._stack:
                    self._stack[-1][i] += delta[i]

    def wrap(self, part: str | Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` windowed: `part` a name, or a function of fn's arguments giving it."""
        def windowed(*args: Any) -> Any:
            return self.window(part if isinstance(part, str) else lambda: part(*args), fn, *args)
        return windowed

    def handle(self, group: str, segments: int, content: int) -> None:
        h = self.handled[group]
        h[0] += segments
        h[1] += content

    def group(self, group: str) -> list[int]:
        """The group's buffers, bytes, bytes written: its parts' summed."""
        return [sum(a[i] for p, a in self.allocs.items() if p.split(".")[0] == group)
                for i in range(3)]


def classify(wire: bytes) -> tuple[str, int]:
    """What a packet is for the windows: ("push" | "gradient" | "collect" (the PS's Interest for
    a gradient) | "interest" | "other", its content's length)."""
    from ndnps.client.wire import parse_data, parse_interest, parse_lp
    from ndnps.ndn.tlv import DATA, INTEREST, LP_PACKET, DecodeError
    from ndnps.protocol import names
    start, end = 0, len(wire)
    try:
        if wire[:1] == bytes([LP_PACKET]):
            lp = parse_lp(wire)
            if lp is None:                          # a Nack, an Ack: not ours
                return "other", 0
            start, end = lp[0], lp[1]
        if wire[start] == INTEREST:
            name = parse_interest(wire, start, end).name
            return ("collect" if names.parse_collect(name) is not None else "interest"), 0
        if wire[start] != DATA:
            return "other", 0
        data = parse_data(wire, start, end)
        name = data.name
    except (DecodeError, IndexError):               # the app drops it and counts it
        return "other", 0
    if names.parse_distribute(name) is not None:
        return "push", len(data.content)
    if names.parse_collect(name) is not None:
        return "gradient", len(data.content)
    return "other", 0


def hook_callbacks(parts: Parts, faces: dict[int, str]) -> None:
    """Window the loop's callbacks that are a face's read (`data_received`, or memnet's
    delivery of one packet to it) or its end-of-turn flush, for the faces in `faces` (id -> "ps" | "worker")."""
    import asyncio.events
    run = asyncio.events.Handle._run

    def windowed_run(handle: Any) -> None:
        cb = handle._callback
        owner = getattr(cb, "__self__", None)
        what = getattr(cb, "__name__", "")
        if what == "_to_app":               # memnet's app face (ndnps.sim) handing its client
            owner, what = getattr(owner, "client", None), "data_received"   # face a packet
        role = faces.get(id(owner))
        if role is None or what not in ("data_received", "_end_turn"):
            run(handle)
            return
        if what == "_end_turn":
            parts.window(f"{role}.flush" if role == "ps" else "collect_worker.flush",
                         run, handle)
            return

        def part() -> str:
            kind, size = classify(handle._args[0])
            if role == "worker" and kind == "push":
                parts.handle("worker", 1, size)
                return "worker.read"
            if role == "worker" and kind == "collect":
                return "collect_worker.answer"
            if role == "ps" and kind == "gradient":
                parts.handle("collect_ps", 1, size)
                return "collect_ps.read"
            return f"other.{role}_read"
        parts.window(part, run, handle)
    setattr(asyncio.events.Handle, "_run", windowed_run)


def instrument(parts: Parts, net: Any, ps: Any, workers: Sequence[Any]) -> None:
    """Windows around each part's code (see the module's docstring)."""
    import ndnps.apps.worker.gradients
    import ndnps.apps.ps.serving
    from ndnps.exchanges.transport.buffers import Assembly
    from ndnps.ml.models import DenseNet
    from ndnps.protocol import messages

    # the forwarder: every packet an app writes
    def fw_part(face_id: int, wire: bytes, kinds: list[str]) -> str:
        kind, size = classify(wire)
        kinds.append(kind)
        if kind == "push":
            parts.handle("forwarder", 1, size)
            return "forwarder.receive"
        if kind == "gradient":
            parts.handle("collect_forwarder", 1, size)
            return "collect_forwarder.receive"
        return "other.forwarder"
    receive = net.receive

    def received(face_id: int, wire: bytes) -> Any:
        kinds: list[str] = []
        out = parts.window(lambda: fw_part(face_id, wire, kinds), receive, face_id, wire)
        if kinds == ["push"]:                   # the forwarder's actions: a copy out per face
            parts.handle("forwarder_out", len(out), 0)
        return out
    net.receive = received

    # the PS: publish (flatten, sign), then its sends
    serving = ps.serving
    for name in ("flatten", "sign_segments"):          # as ndnps/apps/ps/serving.py calls them
        setattr(ndnps.apps.ps.serving, name, parts.wrap(f"ps.{name.split('_')[0]}",
                                               getattr(ndnps.apps.ps.serving, name)))
    publish = serving.publish

    def published(version: int, done: bool, aborted: bool = False) -> Any:
        wires = parts.window("ps.publish", publish, version, done, aborted)
        if wires:
            parts.handle("ps", len(wires), sum(classify(w)[1] for w in wires))
        return wires
    serving.publish = published
    pacer, face = serving.pacer, ps.app.face
    send_all, drain = pacer.send_all, pacer._drain

    async def sent_all(wires: Sequence[bytes], send: Callable[[bytes], object]) -> int:
        return int(await send_all(wires, parts.wrap("ps.send", send)))

    async def drained() -> None:
        parts.window("ps.flush", face.flush)            # what drain writes first, windowed
        if drain is not None:
            await drain()
    pacer.send_all, pacer._drain = sent_all, drained

    # a worker: its reads (hooked below), the version's join and decode within them
    # (only the worker's subscriber assembles, only its receiver parses parameters)
    setattr(Assembly, "blob", parts.wrap("worker.join", Assembly.blob))
    setattr(messages, "parse_params", parts.wrap("worker.decode", messages.parse_params))

    # after the push: the worker's model loads its own copy of the version it computes on
    setattr(DenseNet, "load_params", parts.wrap("worker_model.load", DenseNet.load_params))

    # the collect path: a worker's gradient flattened, signed; the PS's join and decode of it
    setattr(ndnps.apps.worker.gradients, "flatten", parts.wrap("collect_worker.flatten",
                                                  ndnps.apps.worker.gradients.flatten))
    sign = ndnps.apps.worker.gradients.sign_segments

    def signed(blob: Any, *args: Any, **kw: Any) -> list[bytes]:
        wires: list[bytes] = parts.window("collect_worker.sign", lambda: sign(blob, *args, **kw))
        parts.handle("collect_worker", len(wires), sum(classify(w)[1] for w in wires))
        return wires
    setattr(ndnps.apps.worker.gradients, "sign_segments", signed)
    collect = ps.collect
    inner = collect._collect

    async def collected(w: Any, step: int, ref: float, whole: bool,
                        parse: Callable[[list], object]) -> object:
        return await inner(w, step, ref, whole, parts.wrap("collect_ps.decode", parse))
    collect._collect = collected

    hook_callbacks(parts, {id(ps.app.face): "ps",
                           **{id(w.app.face): "worker" for w in workers}})


async def training(parts: Parts, threshold: int, model: Mapping[str, Any], n_workers: int,
                   versions: int) -> dict[str, Any]:
    """The run: the PS and `n_workers` workers on one MemNet, `versions` versions."""
    from ndnps.apps.ps.__main__ import ParameterServer
    from ndnps.apps.worker.__main__ import Worker
    from ndnps.protocol.config import PsConfig, from_table
    memnet = importlib.import_module("tests.support.memnet")   # test support: no types
    gpus = [f"w{i + 1}" for i in range(n_workers)]
    cfg = from_table({"workers": gpus, "min_workers": n_workers, "key": KEY,
                      "dataset": "synthetic", "n_features": model["n_features"],
                      "n_samples": 200 * n_workers, "n_classes": 10,
                      "hidden": list(model["hidden"]), "max_versions": versions,
                      "epochs": 1000, "eval_every": versions, "linger": 0.2})
    net = memnet.MemNet()
    workers = [Worker(g, KEY.encode(), net.app()) for g in gpus]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    await asyncio.sleep(0)
    ps = ParameterServer(PsConfig.of(cfg), net.app())
    instrument(parts, net, ps, workers)
    parts.counter.arm(threshold)
    code = await asyncio.wait_for(ps.run(), 300)
    done, pending = await asyncio.wait(tasks, timeout=30)
    for t in pending:
        t.cancel()
    codes = [t.result() if t in done and not t.cancelled() else None for t in tasks]
    if code != 0 or codes != [0] * n_workers:
        raise RuntimeError(f"the training failed: PS exit {code}, workers {codes}")
    return {"versions": ps.version, "n_params": ps.n_params,
            "segments": len(ps.serving.publisher.get(ps.version) or [])}


def framing(parts: Parts, wires: Sequence[bytes]) -> float:
    """Copies per segment by the face's stream framer (ndnps.ndn.tlv.StreamFramer, the apps'
    and the daemon's) on packets read READ bytes at a time, as a busy socket's reads hold
    them."""
    from ndnps.ndn.tlv import StreamFramer
    stream = b"".join(wires)
    reads = [stream[i:i + READ] for i in range(0, len(stream), READ)]
    framer = StreamFramer()
    got: list[bytes] = []

    def feed() -> None:
        for r in reads:
            got.extend(framer.feed(r)[0])
    parts.window("framing", feed)
    if got != list(wires):
        raise RuntimeError("the framer did not give back the packets it was fed")
    return parts.allocs["framing"][2] / sum(classify(w)[1] for w in wires)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The child: the training run under the counter, the figures."""
    from bench.iteration import MODELS
    from ndnps.forwarder import USE_COMPILED
    from ndnps.client.security import DigestSigner
    from ndnps.client.segments import sign_segments
    from ndnps.ndn.conventions import SEGMENT_SIZE
    from ndnps.protocol import messages, names
    import numpy as np
    if args.model not in MODELS:
        raise RuntimeError(f"--model: one of {sorted(MODELS)}, not {args.model!r}")
    parts = Parts(Counter())
    threshold = SEGMENT_SIZE * 15 // 16
    run = asyncio.run(training(parts, threshold, MODELS[args.model], args.workers,
                               args.versions))
    out: dict[str, Any] = {"segment_bytes": SEGMENT_SIZE}
    allocs: dict[str, float | None] = {}
    parts.handled["worker_model"] = parts.handled["worker"]       # per version received
    for group in GROUPS:
        segs, content = parts.handled[group]
        count, _, written = parts.group(group)
        out[group] = round(written / content, 2) if content else None
        allocs[group] = round(count / segs, 2) if segs else None
    # the framer alone, on a version's packets
    wires = sign_segments(messages.params_pieces(np.zeros(run["n_params"], np.float32), 1,
                                                 False),
                          lambda s: names.distribute("ps", "t", 1, s), DigestSigner())
    parts.counter.arm(threshold)
    out["framing"] = round(framing(parts, wires), 2)
    out.update({
        "method": "bytes written into new buffers of >= threshold bytes (an LD_PRELOAD "
                  "malloc counter) in each part's code / the segment content it handled; "
                  "the PS and workers in one process on tests.support.memnet (the forwarder's "
                  "core), bench/micro/copies.py",
        "segments": parts.handled["ps"][0],
        "run": {"model": args.model, "n_params": run["n_params"], "workers": args.workers,
                "versions": run["versions"], "segments_per_version": run["segments"],
                "threshold": threshold, "build": "compiled" if USE_COMPILED else "python"},
        "allocs_per_segment": allocs,
        "forwarder_copies_out_per_segment": round(
            parts.handled["forwarder_out"][0] / max(1, parts.handled["forwarder"][0]), 2),
        "detail": {p: {"buffers": a[0], "bytes": a[1], "written": a[2]}
                   for p, a in sorted(parts.allocs.items()) if a[0] or a[2]},
        "handled": {g: {"segments": h[0], "bytes": h[1]}
                    for g, h in sorted(parts.handled.items()) if g in GROUPS},
    })
    return out


# ---- the parent: the child run under the counter ---------------------------------------------



def in_child(argv: list[str]) -> tuple[dict[str, Any], str]:
    """This module run again under the counter: its result (or {"error": ...}), its stderr."""
    with tempfile.TemporaryDirectory(prefix="copies-") as tmp:
        lib = build_shim(Path(tmp))
        if isinstance(lib, str):
            return {"error": lib}, ""
        env = {**os.environ, "LD_PRELOAD": str(lib), "PYTHONMALLOC": "malloc",
               "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [
                   os.environ.get("PYTHONPATH")])])}
        try:
            proc = subprocess.run([sys.executable, "-m", "bench.micro.copies", "--child",
                                   *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=900)
        except subprocess.TimeoutExpired:
            return {"error": "the counted run took more than 900 s"}, ""
    lines = proc.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        result = None
    if proc.returncode != 0 or not isinstance(result, dict):
        return {"error": f"the counted run failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip()[-400:]}"}, proc.stderr
    return result, proc.stderr


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.micro.copies",
                                description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true",
                   help="print only the result's JSON line (stdout), as bench.cpu reads it")
    p.add_argument("--model", default="100k", help="bench.iteration's model (default 100k)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--versions", type=int, default=5)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.workers < 1 or args.versions < 1:
        p.error("--workers and --versions: at least 1")
    own = ["--model", args.model, "--workers", str(args.workers),
           "--versions", str(args.versions)]
    if args.child:
        import logging
        logging.basicConfig(level=logging.WARNING)
        try:
            result = measure(args)
        except RuntimeError as e:
            print(json.dumps({"error": str(e)}), flush=True)
            return 0
        print(json.dumps(result), flush=True)
        return 0
    result, err = in_child(own)
    if "error" in result:
        print(f"copies: not measured: {result['error']}", file=sys.stderr)
    elif not args.json:
        print(err, end="", file=sys.stderr)
        for key in (*GROUPS, "framing"):
            print(f"{key:18} {result.get(key)}", file=sys.stderr)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
