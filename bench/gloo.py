"""torch.distributed gloo allreduce: the collective baseline for ndnps (optional: torch).

    pip install -e '.[baselines]'          # torch==2.13.0, the CPU build
    python -m bench.gloo run --workers 4 --n-features 256 --hidden 256,128 --versions 20

`run` starts N rank processes on 127.0.0.1 (torch.distributed, backend gloo: rendezvous through
a file:// store in the run directory, gloo's TCP connections on the loopback interface) running
synchronous data-parallel SGD with no parameter server. Every rank holds the whole model and
optimizer; for version v it computes its gradient exactly as a bench.tcp_ps worker does (the
same dataset, shard and batches: ndnps.ml.train.WorkerBatches; the same model: ndnps.ml.models;
`tcp_ps.compute_step`), allreduces the flat float32 gradient in place (SUM, over
torch.from_numpy's view of it), divides by N and applies ndnps.ml.models.SGD with the TCP PS's
hyper-parameters, giving version v + 1 on every rank at once.

Averaging: the PS sums the N gradients in worker order, then divides by N
(ndnps.ml.train.average_grads); gloo sums in its own order (ring chunks start at different ranks),
then each rank divides by N the same way. For N = 2 the sum a + b is the same float32 as b + a,
so every version is bit-identical to the PS's and to ndnps.ml.train.train_sync_reference
(tests/integration/test_gloo_baseline.py). For N > 2 the order of the additions differs, so an
average may differ from the PS's by float32 rounding (about an ulp per step); every rank
receives the same reduced bits, so the replicas never drift apart.

Metrics in the shape of the TCP PS's, so bench.scenario_runs.TrainingRun reads them unchanged:
rank 0 writes metrics/ps.jsonl like the PS (`version`, `t`; `allreduce` and `apply` seconds),
every rank writes metrics/w<rank+1>.jsonl like a worker (`step`, `compute`, `compute_at`,
`loss`).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.tcp_ps import (Children, Metrics, limit_blas, worker_setup,  # noqa: E402
                          add_training_args, compute_step, model_args, report_run)

INSTALL = "pip install -e '.[baselines]'"


def _init_torch():
    """torch with one thread (as the apps' one BLAS thread; torch computes nothing here, but
    its pools would otherwise compete for the 2 cores), and torch.distributed."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    limit_blas()                       # after torch: its OpenMP pool is limited too
    return torch, dist


def rank_main(args: argparse.Namespace) -> int:
    """One rank: `args.versions` synchronous SGD steps, allreducing every gradient."""
    import numpy as np
    from ndnps.protocol.codec import flatten, unflatten
    from ndnps.ml.models import SGD

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")      # gloo's pairs on 127.0.0.1
    torch, dist = _init_torch()
    model, pspec, batches, metrics = worker_setup(args)
    ps_metrics = Metrics(args.ps_metrics, role="ps", name="ps")    # rank 0 only: path given
    dist.init_process_group("gloo", init_method=args.init, rank=args.index,
                            world_size=args.workers, timeout=timedelta(seconds=120))
    params = flatten(model.params)      # the replica: one flat vector; SGD steps its views
    views = unflatten(params, pspec)
    opt = SGD(args.lr, args.momentum)
    dist.barrier()
    ps_metrics.write({"event": "start", "n_params": model.n_params, "workers": args.workers})
    for version in range(args.versions):
        vec, loss, compute, started = compute_step(model, pspec, batches, params, version)
        metrics.write({"step": version, "compute": compute, "compute_at": started, "loss": loss})
        t0 = time.monotonic()
        dist.all_reduce(torch.from_numpy(vec))              # in place: vec is the sum
        vec /= args.workers                                 # as average_grads: sum, then / N
        t1 = time.monotonic()
        opt.step(views, unflatten(vec, pspec))
        ps_metrics.write({"version": version + 1, "allreduce": t1 - t0,
                          "apply": time.monotonic() - t1})
    ps_metrics.write({"event": "end", "version": args.versions})
    if args.final:
        Path(args.final).mkdir(parents=True, exist_ok=True)
        np.save(Path(args.final) / f"rank{args.index}.npy", params)
    dist.destroy_process_group()
    return 0


def run_training(out: Path, n_features: int, hidden: list[int], n_samples: int, workers: int,
                 versions: int, timeout: float = 600.0) -> Path:
    """N rank processes (as tcp_ps.run_training's signature); returns the directory holding
    metrics/ps.jsonl, w*.jsonl and final/rank<r>.npy (each rank's final flat parameters)."""
    out.mkdir(parents=True, exist_ok=True)
    store = out / "rendezvous"
    store.unlink(missing_ok=True)       # a stale FileStore would join an old run
    common = [*model_args(n_features, hidden, n_samples, workers, versions),
              "--init", store.as_uri(), "--final", str(out / "final")]
    with Children(out) as kids:
        for i in range(workers):
            ps = ["--ps-metrics", str(out / "metrics" / "ps.jsonl")] if i == 0 else []
            kids.spawn(f"rank{i}", ["bench.gloo", "rank", *common, "--index", str(i),
                                    "--metrics", str(out / "metrics" / f"w{i + 1}.jsonl"), *ps])
        kids.wait_all(timeout, "gloo run")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gloo", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sk = sub.add_parser("rank", help="one rank (started by run)")
    add_training_args(sk)
    sk.add_argument("--index", type=int, required=True, help="this rank")
    sk.add_argument("--init", required=True, help="init_method, e.g. file:///tmp/x/rendezvous")
    sk.add_argument("--ps-metrics", help="rank 0: the PS-shaped per-version metrics")
    sk.add_argument("--final", help="write DIR/rank<r>.npy, the final flat parameters")
    sr = sub.add_parser("run", help="N ranks; prints iteration and compute medians")
    add_training_args(sr)
    sr.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "rank":
        return rank_main(args)
    return report_run(run_training, args, "gloo-")


if __name__ == "__main__":
    sys.exit(main())
