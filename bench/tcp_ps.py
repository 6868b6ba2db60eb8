"""A plain asyncio TCP parameter server: the honest "ps-lite-like" baseline for ndnps.

    python -m bench.tcp_ps run --workers 4 --n-features 256 --hidden 256,128 --versions 20
    python -m bench.tcp_ps ps --host 10.0.0.1 --ready FILE ... ; ... worker --connect 10.0.0.1 ...

`run` starts one PS process and N worker processes on 127.0.0.1 (uvloop streams, one TCP connection
per worker, 8-byte length-prefixed frames) running the same synchronous SGD as
`ndnps.apps.ps`/`ndnps.apps.worker`: the same dataset, shards and batches
(ndnps.ml.train.WorkerBatches), the same model and optimizer (ndnps.ml.models), the same codec and
messages (ndnps.protocol.messages: gradient_blob / params_blob, parsed and checked the same way).
Each worker computes the gradient of version v, sends it; the PS waits for all N, averages them in
worker order, steps SGD and sends version v+1 to every worker over its connection. No names, no
signatures, no forwarder: what is left is compute, codec and socket I/O. Both sides write
JSON-lines metrics in the shape of the ndnps apps' (`version`, `t`; `step`, `compute`), so the same
code reads both; `t` counts from the scenario runner's start where it set NDNPS_RUN_T0
(ndnps.ndn.clock).

`ps` and `worker` alone are the roles `run` starts, for other placements: the scenario runner
runs them on the bottleneck's two network namespaces (`[run] system = "tcp"`, ndnps/lab/
baseline.py), the PS listening on its host's address (`--host`), the workers connecting to it
(`--connect`); the PS then counts versions as the ndnps PS does (`--epochs` over each worker's
shard, capped by `--max-versions`), evaluates test accuracy every `--eval-every` versions (and
after the last), and stops at `--target-accuracy`, as it does.

`compute` computes the same gradients back to back in one process, no I/O (compute alone).
"One model's transfer time over the same sockets" in the iteration benchmark: bench/transfer.py.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FRAME = struct.Struct("<Q")


def limit_blas() -> None:
    """One BLAS thread per process, as the ndnps apps run (ndnps/apps/common/launch.py). numpy
    first: threadpoolctl limits only the BLAS libraries already loaded."""
    import numpy  # noqa: F401
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
    except ImportError:                 # pragma: no cover
        pass


def _run(coro) -> int:
    try:
        import uvloop
        return uvloop.run(coro)
    except ImportError:                 # pragma: no cover
        return asyncio.run(coro)


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (n,) = FRAME.unpack(await reader.readexactly(FRAME.size))
    return await reader.readexactly(n)


def _write_frame(writer: asyncio.StreamWriter, blob: bytes) -> None:
    writer.write(FRAME.pack(len(blob)))
    writer.write(blob)


def _setup(args):
    from ndnps.ml.data import load_dataset
    from ndnps.ml.models import build_model
    sizes = {"n_samples": args.n_samples, "n_features": args.n_features,
             "n_classes": args.n_classes}
    # 0: the dataset's default, as ndnps's training config reads it
    ds = load_dataset("synthetic", args.seed, **{k: v for k, v in sizes.items() if v})
    spec = {"n_in": ds.n_features, "n_classes": ds.n_classes, "kind": "mlp",
            "hidden": args.hidden}
    return ds, spec, build_model(spec, args.seed)


class Metrics:
    def __init__(self, path: str | None, **static) -> None:
        from ndnps.ndn.clock import run_origin
        self.f = open(path, "a", buffering=1) if path else None
        self.static = static
        self.start = run_origin()            # the runner's start, if one set it; else now

    def write(self, rec: dict) -> None:
        if self.f:
            self.f.write(json.dumps({**self.static, "t": time.monotonic() - self.start,
                                     "ts": time.time(), **rec}) + "\n")


# ---- the PS ------------------------------------------------------------------------------------

def total_versions(args, n_train: int) -> int:
    """--versions; or with --epochs, as the ndnps PS counts them: epochs over each worker's
    shard (steps_per_epoch), capped by --max-versions (0: no cap)."""
    from ndnps.ml.train import steps_per_epoch
    if not args.epochs:
        return args.versions
    total = args.epochs * steps_per_epoch(n_train, args.workers, args.batch)
    return min(total, args.max_versions) if args.max_versions else total


async def ps_main(args) -> int:
    import numpy as np
    from ndnps.protocol import messages
    from ndnps.protocol.codec import flatten, param_spec, unflatten
    from ndnps.ml.models import SGD
    from ndnps.ml.train import average_grads

    ds, _, model = _setup(args)
    pspec = param_spec(model.params)
    n_params = model.n_params
    total = total_versions(args, len(ds.X_train))
    opt = SGD(args.lr, args.momentum, args.weight_decay)
    metrics = Metrics(args.metrics, role="ps", name="ps")
    conns: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
    mss: dict[int, int] = {}       # each connection's segment size: the path's MTU - 40 (- 12)
    all_in = asyncio.Event()

    async def on_conn(reader, writer):
        sock = writer.get_extra_info("socket")
        tcp = sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6)
        if tcp:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        (index,) = FRAME.unpack(await reader.readexactly(FRAME.size))
        if tcp:
            mss[index] = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
        conns[index] = (reader, writer)
        if len(conns) == args.workers:
            all_in.set()

    server = await asyncio.start_server(on_conn, args.host, args.port)
    Path(args.ready).write_text(str(server.sockets[0].getsockname()[1]))
    await asyncio.wait_for(all_in.wait(), 120)
    order = sorted(conns)
    metrics.write({"event": "start", "n_params": n_params, "total_steps": total,
                   "workers": [f"w{i + 1}" for i in order],
                   "mss": {f"w{i + 1}": mss[i] for i in order if i in mss}})

    async def push(version: int, done: bool) -> int:
        """Version `version` to every worker; the bytes written."""
        blob = messages.params_blob(flatten(model.params), version, done)
        for i in order:
            _write_frame(conns[i][1], blob)
        await asyncio.gather(*(conns[i][1].drain() for i in order))
        return len(order) * (FRAME.size + len(blob))

    def evaluate(force: bool) -> float | None:
        """Test accuracy every --eval-every versions and at the last (0: never)."""
        if args.eval_every and (force or version % args.eval_every == 0):
            return float(model.accuracy(ds.X_test, ds.y_test))
        return None

    version = 0
    accuracy = None
    done = False
    await push(0, False)
    while not done:
        t0 = time.monotonic()
        blobs = await asyncio.gather(*(_read_frame(conns[i][0]) for i in order))
        t1 = time.monotonic()
        grads = [messages.parse_gradient(b, n_params, version) for b in blobs]
        avg = average_grads([unflatten(g.vector, pspec) for g in grads])
        opt.step(model.params, avg)
        version += 1
        accuracy = evaluate(force=version >= total)
        done = version >= total or bool(args.target_accuracy and accuracy is not None
                                        and accuracy >= args.target_accuracy)
        t2 = time.monotonic()
        sent = await push(version, done)
        metrics.write({"version": version, "collect_wait": t1 - t0, "apply": t2 - t1,
                       "push": time.monotonic() - t2,
                       "compute": float(np.mean([g.compute for g in grads])),
                       "loss": float(np.mean([g.loss for g in grads])),
                       "gradients": len(grads), "bytes_sent": sent, "accuracy": accuracy})
    for i in order:
        conns[i][1].close()
    server.close()
    metrics.write({"event": "end", "version": version,
                   **({"accuracy": accuracy} if accuracy is not None else {})})
    return 0


# ---- a worker ----------------------------------------------------------------------------------

def compute_step(model, pspec, batches, params, step: int):
    """One gradient exactly as ndnps.apps.worker.gradients.Gradients.compute makes it (load_params
    .. flatten): (vector, loss, compute seconds, wall-clock start)."""
    from ndnps.protocol.codec import flatten, unflatten
    started = time.time()
    t0 = time.perf_counter()
    model.load_params(unflatten(params, pspec))
    X, y = batches.for_step(step)
    loss, grads = model.loss_and_grad(X, y)
    vec = flatten(grads)
    return vec, loss, time.perf_counter() - t0, started


def worker_setup(args: argparse.Namespace):
    """A worker's (or a gloo rank's) model, parameter spec, batches and metrics."""
    from ndnps.protocol.codec import param_spec
    from ndnps.ml.train import WorkerBatches
    ds, _, model = _setup(args)
    batches = WorkerBatches(ds, args.workers, args.index, args.batch, args.seed)
    metrics = Metrics(args.metrics, role="worker", name=f"w{args.index + 1}")
    return model, param_spec(model.params), batches, metrics


async def worker_main(args) -> int:
    import numpy as np
    from ndnps.protocol import messages

    model, pspec, batches, metrics = worker_setup(args)
    reader, writer = await asyncio.open_connection(args.connect, args.port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    writer.write(FRAME.pack(args.index))
    version = -1
    while True:
        p = messages.parse_params(await _read_frame(reader), model.n_params, version + 1)
        version = p.version
        if p.done:
            break
        vec, loss, compute, started = compute_step(model, pspec, batches, np.array(p.vector),
                                                   version)
        _write_frame(writer, messages.gradient_blob(vec, version, version, loss, compute))
        await writer.drain()
        metrics.write({"step": version, "compute": compute, "compute_at": started})
    writer.close()
    return 0


def compute_main(args) -> int:
    """Compute alone: the same gradients back to back, no I/O (the SGD step is skipped: the
    parameters stay the initial ones, which costs the same arithmetic)."""
    from ndnps.protocol.codec import flatten
    model, pspec, batches, metrics = worker_setup(args)
    params = flatten(model.params)
    for step in range(args.versions):
        _, _, compute, started = compute_step(model, pspec, batches, params, step)
        metrics.write({"step": step, "compute": compute, "compute_at": started})
    return 0


# ---- orchestration (called by bench.iteration) ----------------------------------------------------

def model_args(n_features: int, hidden: list[int], n_samples: int, workers: int,
               versions: int) -> list[str]:
    return ["--workers", str(workers), "--n-features", str(n_features),
            "--hidden", ",".join(map(str, hidden)), "--n-samples", str(n_samples),
            "--versions", str(versions)]


def run_compute(out: Path, n_features: int, hidden: list[int], n_samples: int, workers: int,
                steps: int, timeout: float = 600.0) -> Path:
    """One process computing worker 0's gradients back to back; metrics/w1.jsonl."""
    from bench.common import env
    (out / "metrics").mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "bench.tcp_ps", "compute",
            *model_args(n_features, hidden, n_samples, workers, steps), "--index", "0",
            "--metrics", str(out / "metrics" / "w1.jsonl")]
    done = subprocess.run(argv, cwd=str(ROOT), env={**os.environ, **env()}, timeout=timeout,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"compute alone failed: {done.stderr[-1500:]}")
    return out


class Children:
    """Child processes of one run (`python -m MODULE ...`, cwd = the checkout, each logging to
    out/logs/NAME.log); on leaving the `with`, every one still running is killed, pass or fail."""

    def __init__(self, out: Path) -> None:
        from bench.common import env
        self.out = out
        self.env = {**os.environ, **env()}
        self.procs: list[subprocess.Popen] = []
        (out / "metrics").mkdir(parents=True, exist_ok=True)
        (out / "logs").mkdir(exist_ok=True)

    def __enter__(self) -> "Children":
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        with open(self.out / "logs" / f"{name}.log", "wb") as f:
            p = subprocess.Popen([sys.executable, "-m", *argv], stdout=f, stderr=subprocess.STDOUT,
                                 cwd=str(ROOT), env=self.env)
        self.procs.append(p)
        return p

    def log(self, name: str) -> str:
        return (self.out / "logs" / f"{name}.log").read_text(errors="replace")

    def wait_all(self, timeout: float, what: str) -> None:
        """Wait for every child to exit 0 within `timeout` s; the first to fail, or the
        deadline, raises with the logs (the others are killed on leaving the `with`)."""
        deadline = time.monotonic() + timeout
        while True:
            codes = [p.poll() for p in self.procs]         # every child, every round
            if None not in codes or any(c not in (None, 0) for c in codes) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        codes = [p.poll() for p in self.procs]
        if any(c != 0 for c in codes):
            logs = "\n".join(f"-- {f.name}\n" + f.read_text(errors="replace")[-1500:]
                             for f in sorted((self.out / "logs").glob("*.log")))
            late = " (None: still running, killed)" if None in codes else ""
            raise RuntimeError(f"{what} failed: exit codes {codes}{late}\n{logs}")


def run_training(out: Path, n_features: int, hidden: list[int], n_samples: int, workers: int,
                 versions: int, timeout: float = 600.0) -> Path:
    """PS + N worker processes; returns the directory holding metrics/ps.jsonl, w*.jsonl."""
    common = model_args(n_features, hidden, n_samples, workers, versions)
    ready = out / "ps.port"
    with Children(out) as kids:
        ps = kids.spawn("ps", ["bench.tcp_ps", "ps", *common, "--ready", str(ready),
                               "--metrics", str(out / "metrics" / "ps.jsonl")])
        deadline = time.monotonic() + 60
        while not (ready.exists() and ready.read_text()):
            if ps.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tcp PS did not start: {kids.log('ps')}")
            time.sleep(0.05)
        port = ready.read_text()
        for i in range(workers):
            kids.spawn(f"w{i + 1}", ["bench.tcp_ps", "worker", *common, "--port", port,
                                     "--index", str(i),
                                     "--metrics", str(out / "metrics" / f"w{i + 1}.jsonl")])
        kids.wait_all(timeout, "tcp PS run")
    return out


# ---- command line ------------------------------------------------------------------------------

def add_training_args(sp: argparse.ArgumentParser) -> None:
    """The training's flags, shared by every role here and by bench.gloo's."""
    sp.add_argument("--workers", type=int, default=4)
    sp.add_argument("--n-features", type=int, default=256)
    sp.add_argument("--hidden", type=lambda s: [int(x) for x in s.split(",")],
                    default=[256, 128])
    sp.add_argument("--n-samples", type=int, default=4000)
    sp.add_argument("--n-classes", type=int, default=10)
    sp.add_argument("--versions", type=int, default=20)
    sp.add_argument("--batch", type=int, default=32)
    sp.add_argument("--lr", type=float, default=0.1)
    sp.add_argument("--momentum", type=float, default=0.9)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--metrics")


def report_run(train: Callable[..., Path], args: argparse.Namespace, prefix: str) -> int:
    """`run`: one training by `train` (a run_training), its medians printed as one JSON line,
    read back by the same reader as the ndnps runs."""
    from bench.scenario_runs import TrainingRun
    out = args.out or Path(tempfile.mkdtemp(prefix=prefix))
    run = TrainingRun(train(out, args.n_features, args.hidden, args.n_samples, args.workers,
                            args.versions))
    print(json.dumps({"iteration_median": run.iteration_median(),
                      "compute_median": run.compute_median(), "dir": str(out)}))
    return 0


def parser() -> argparse.ArgumentParser:
    """Every role's flags (the scenario runner's argv, ndnps/lab/baseline.py, is checked
    against it in tests/unit/test_lab_bottleneck.py)."""
    p = argparse.ArgumentParser(prog="python -m bench.tcp_ps", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    sp = sub.add_parser("ps")
    add_training_args(sp)
    sp.add_argument("--host", default="127.0.0.1", help="address to listen on")
    sp.add_argument("--port", type=int, default=0)
    sp.add_argument("--ready", required=True, help="file the port is written to once listening")
    sp.add_argument("--epochs", type=int, default=0,
                    help="epochs over each worker's shard, as ndnps counts versions (0: "
                         "--versions decides)")
    sp.add_argument("--max-versions", type=int, default=0, help="with --epochs: at most this "
                                                                "many versions (0: no cap)")
    sp.add_argument("--weight-decay", type=float, default=0.0)
    sp.add_argument("--eval-every", type=int, default=0,
                    help="test accuracy every this many versions and after the last (0: never)")
    sp.add_argument("--target-accuracy", type=float, default=0.0,
                    help="stop once test accuracy reaches this (0: off)")
    sw = sub.add_parser("worker")
    add_training_args(sw)
    sw.add_argument("--connect", default="127.0.0.1", help="the PS's address")
    sw.add_argument("--port", type=int, required=True)
    sw.add_argument("--index", type=int, required=True)
    sc = sub.add_parser("compute", help="compute alone: gradients back to back, no I/O")
    add_training_args(sc)
    sc.add_argument("--index", type=int, default=0)
    sr = sub.add_parser("run", help="PS + workers; prints iteration and compute medians")
    add_training_args(sr)
    sr.add_argument("--out", type=Path)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.cmd in ("ps", "worker", "compute"):
        limit_blas()
        if args.cmd == "compute":
            return compute_main(args)
        return _run(ps_main(args) if args.cmd == "ps" else worker_main(args))
    return report_run(run_training, args, "tcpps-")


if __name__ == "__main__":
    sys.exit(main())
