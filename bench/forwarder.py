"""Interest/Data exchanges per second through one forwarder process, against a byte relay.

    python -m bench.forwarder [--size 100,8000] [--window 64] [--seconds 5] [--rounds 3] [--quick]
                              [--trees base=/tmp/fwbase,head=.] [--compiled | --pure-only]

A consumer keeps `window` Interests in flight, a producer answers each with a Data of `size`
Content bytes (bench/loadgen.py, bench/relay.py: separate uvloop processes, raw pre-encoded TLV).
Side by side in one run they talk (a) through a trivial uvloop byte relay, the Python I/O
ceiling of this machine, and (b) through `python -m forwarder`, the producer having registered
/bench with rib/register. The runs alternate relay, forwarder, relay, forwarder ... so the noise
of a shared machine falls on both alike; the figures are medians over the rounds.

Each run reports the CPU share of every process over the measured window, so it shows which
process was the bottleneck (a load generator near 100% while the forwarder idles would make
the ratio meaningless).

`--trees LABEL=DIR,...` runs the forwarder of each source tree (a `git worktree` of another
commit, a copy with the compiled core ...) in the same alternation: relay, A, B, relay, A, B
...; the load generator is always this tree's. Each tree gets its own figures under
"trees"; the headline is the tree whose DIR is this one (else the first).

By default this tree runs twice in the alternation: as installed ("compiled": its mypyc core,
built by `pip install -e .`; the headline) and its Python sources (NDNPS_PURE=1, "python"):
the gain of the build, in one run. `--pure-only` runs the sources alone; an install without
the compiled core measures them alone, saying so.

Both Data sizes the target is set for (100 and 8000 Content bytes) by default, one after the other.
Writes bench/results.json (key "forwarder" -> "size_<N>", other keys kept) and prints one JSON
line last: {"size_<N>": {"fwd_per_s": ..., "relay_per_s": ..., "ratio": ...}, ...,
"ratio": <the smallest>, "target": 0.8}.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import ROOT, emit, fmt, log, parse_trees, save, stamp
from ndnps.forwarder import PURE_ENV, USE_COMPILED
from bench.common import env as _env
from ndnps.lab.process import ManagedProcess, unix_socket_accepts, wait_until

TARGET = 0.8


def _py(*args: str) -> list[str]:
    return [sys.executable, *args]


def _wait_line(proc: ManagedProcess, text: str, timeout: float) -> None:
    def seen() -> bool:
        try:
            return text in proc.log_path.read_text(errors="replace")
        except OSError:
            return False
    wait_until(seen, timeout, proc, f"printing {text}")


def _tails(procs: list[ManagedProcess]) -> RuntimeError:
    """Every process's log tail, as the cause of a failed run."""
    return RuntimeError("\n".join(f"--- {p.name} (exit {p.poll()}):\n{p.tail(15)}"
                                   for p in procs))


def run_once(mode: str, workdir: Path, size: int, window: int, seconds: float, warmup: float,
             digest: bool = False, fwd_argv: list[str] | None = None,
             on_measure=None, pin: bool = False, tree: Path = ROOT,
             fwd_env: dict[str, str] | None = None, trace: bool = False,
             seq_type: int = 0x08) -> dict:
    """One measured run through the relay (mode "relay") or a forwarder (mode "fwd").

    `fwd_argv` replaces the forwarder's command prefix (e.g. to run it under a profiler; the
    flags --unix/--tcp/--udp/--log-level are appended). `on_measure(pids)` is called once
    the consumer starts, for a profiler to attach. `pin`: the relay or forwarder on CPU 0,
    consumer and producer on the other CPUs. `tree`: the source tree the forwarder runs from,
    with `fwd_env` added to its environment. `trace`: the forwarder writes its per-face rate
    trace by packet class, as in every scenario run ([trace] in its configuration)."""
    ncpu = os.cpu_count() or 1

    def place(proc: ManagedProcess, server_side: bool) -> None:
        if pin and ncpu >= 2:
            try:
                os.sched_setaffinity(proc.pid, {0} if server_side else set(range(1, ncpu)))
            except OSError:
                pass

    workdir.mkdir(parents=True, exist_ok=True)
    env = _env()
    procs: list[ManagedProcess] = []
    try:
        if mode == "relay":
            csock, psock = str(workdir / "c.sock"), str(workdir / "p.sock")
            ready = workdir / "relay.ready"
            server = ManagedProcess("relay", _py("-m", "bench.relay",
                                                  "--consumer-sock", csock, "--producer-sock",
                                                  psock, "--ready", str(ready)),
                                    workdir / "relay.log", env=env, cwd=str(ROOT))
            procs.append(server)
            place(server, True)
            wait_until(ready.exists, 15, server, "listening")
            register = []
        else:
            csock = psock = str(workdir / "fwd.sock")
            # `-m forwarder`: the alias, in a source tree from before the move into ndnps too
            argv = (fwd_argv or _py("-m", "forwarder")) + [
                "--unix", csock, "--tcp", "0", "--udp", "0", "--log-level", "WARNING"]
            if trace:
                conf = workdir / "trace.toml"
                conf.write_text(f'[trace]\nrates = "{workdir / "rates.tsv"}"\n')
                argv += ["--config", str(conf)]
            fenv = {"PYTHONPATH": os.pathsep.join([str(tree), env["PYTHONPATH"]]),
                    **(fwd_env or {})}
            server = ManagedProcess("forwarder", argv, workdir / "forwarder.log", env=fenv,
                                    cwd=str(tree))
            procs.append(server)
            place(server, True)
            wait_until(lambda: unix_socket_accepts(csock), 30, server, "listening")
            register = ["--register"]
        producer = ManagedProcess("producer", _py("-m", "bench.loadgen", "producer", "--sock",
                                                  psock, "--size", str(size), *register,
                                                  *(["--digest"] if digest else [])),
                                  workdir / "producer.log", env=env, cwd=str(ROOT))
        procs.append(producer)
        place(producer, False)
        _wait_line(producer, "READY", 15)
        out = workdir / "consumer.json"
        if out.exists():
            out.unlink()
        consumer = ManagedProcess("consumer", _py("-m", "bench.loadgen", "consumer", "--sock",
                                                  csock, "--window", str(window), "--warmup",
                                                  str(warmup), "--seconds", str(seconds),
                                                  "--watch-pids", f"{server.pid},{producer.pid}",
                                                  "--seq-type", str(seq_type),
                                                  "--out", str(out)),
                                  workdir / "consumer.log", env=env, cwd=str(ROOT))
        procs.append(consumer)
        place(consumer, False)
        if on_measure is not None:
            on_measure({"server": server.pid, "producer": producer.pid, "consumer": consumer.pid})
        rc = consumer.wait(warmup + seconds + 30)
        if rc != 0 or not out.exists():
            raise consumer.fail(f"exited with code {rc}") from _tails(procs)
        for p in (server, producer):
            if p.poll() is not None:
                raise p.fail(f"exited with code {p.poll()} during the run") from _tails(procs)
        result = json.loads(out.read_text())
        cpu = result.pop("cpu")
        result["cpu"] = {"consumer": round(cpu.get("consumer", 0.0), 3),
                         "producer": round(cpu.get(str(producer.pid), 0.0), 3),
                         mode: round(cpu.get(str(server.pid), 0.0), 3)}
        return result
    finally:
        for p in reversed(procs):
            p.stop()


def measure(size: int, window: int, seconds: float, rounds: int, warmup: float,
            digest: bool = False, log=print, pin: bool = False,
            trees: dict[str, Path] | None = None,
            tree_env: dict[str, dict[str, str]] | None = None, trace: bool = False,
            seq_type: int = 0x08) -> dict:
    trees = trees or {"head": ROOT}
    tree_env = tree_env or {}
    workdir = Path(tempfile.mkdtemp(prefix="fwdbench-"))
    runs: dict[str, list[dict]] = {"relay": [], **{label: [] for label in trees}}
    try:
        for r in range(rounds):
            for label in runs:
                mode = "relay" if label == "relay" else "fwd"
                tree = trees.get(label, ROOT)
                try:
                    res = run_once(mode, workdir / f"{label}{r}", size, window, seconds, warmup,
                                   digest, pin=pin, tree=tree, fwd_env=tree_env.get(label),
                                   trace=trace, seq_type=seq_type)
                except Exception as e:          # one retry: a shared host has hiccups
                    log(f"round {r + 1} {label}: run failed, retrying once: {e}")
                    res = run_once(mode, workdir / f"{label}{r}b", size, window, seconds,
                                   warmup, digest, pin=pin, tree=tree,
                                   fwd_env=tree_env.get(label), trace=trace,
                                   seq_type=seq_type)
                runs[label].append(res)
                log(f"round {r + 1}/{rounds} {label:8s}: {res['per_s']:9.0f} exchanges/s  "
                    f"cpu {res['cpu']}  nacks {res['nacks']} lost {res['lost']}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    relay = statistics.median(r["per_s"] for r in runs["relay"])

    def cpu_us(label: str, who: str) -> float:
        return round(statistics.median(r["cpu"][who] / r["per_s"] * 1e6 for r in runs[label]), 2)

    def figures(label: str) -> dict:
        fwd = statistics.median(r["per_s"] for r in runs[label])
        # ratio of the medians, and the median of the per-round ratios (both side by side)
        per_round = [f["per_s"] / r["per_s"] for f, r in zip(runs[label], runs["relay"])]
        return {"fwd_per_s": round(fwd, 1), "ratio": round(fwd / relay, 4),
                "ratio_per_round": [round(x, 4) for x in per_round],
                "cpu_us_per_exchange": {"forwarder": cpu_us(label, "fwd"),
                                        "consumer": cpu_us(label, "consumer"),
                                        "producer": cpu_us(label, "producer")}}

    here = [lb for lb, t in trees.items() if t.resolve() == ROOT.resolve()]
    head = here[0] if here else next(iter(trees))
    main_fig = figures(head)
    out = {
        "fwd_per_s": main_fig["fwd_per_s"],
        "relay_per_s": round(relay, 1),
        "ratio": main_fig["ratio"],
        "ratio_per_round": main_fig["ratio_per_round"],
        # CPU µs per exchange (median over rounds): steadier than throughput on a noisy host
        "cpu_us_per_exchange": {
            "fwd": main_fig["cpu_us_per_exchange"],
            "relay": {"relay": cpu_us("relay", "relay"), "consumer": cpu_us("relay", "consumer"),
                      "producer": cpu_us("relay", "producer")}},
        "config": {"size": size, "window": window, "seconds": seconds, "rounds": rounds,
                   "warmup": warmup, "digest": digest, "pin": pin, "trace": trace,
                   "seq_type": seq_type},
        "runs": runs,
        **stamp(),
    }
    if len(trees) > 1:
        out["headline_tree"] = head
        out["trees"] = {label: {"dir": str(t), **figures(label)} for label, t in trees.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.forwarder", description=__doc__.split("\n")[0])
    p.add_argument("--size", default="100,8000",
                   help="Content bytes per Data, comma-separated (default 100,8000)")
    p.add_argument("--window", type=int, default=64, help="Interests in flight (default 64)")
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    p.add_argument("--rounds", type=int, default=3, help="relay/forwarder pairs (default 3)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per run")
    p.add_argument("--quick", action="store_true", help="1 round of 2 s per size")
    p.add_argument("--digest", action="store_true",
                   help="producer computes real DigestSha256 signatures (default: fixed)")
    p.add_argument("--pin", action="store_true",
                   help="forwarder/relay on CPU 0, consumer and producer on the others")
    p.add_argument("--trees", default="",
                   help="LABEL=DIR,...: forwarders of these source trees side by side "
                        "(default: this tree only)")
    p.add_argument("--trace", action="store_true",
                   help="forwarders write their rate trace ([trace]), as in scenario runs")
    p.add_argument("--segment-names", action="store_true",
                   help="Interests /bench/<SegmentNameComponent> (typed, as training traffic) "
                        "instead of /bench/<generic component>")
    p.add_argument("--pure-only", action="store_true",
                   help="only this tree's Python sources (NDNPS_PURE=1), not its compiled build")
    p.add_argument("--no-save", action="store_true", help="do not write bench/results.json")
    args = p.parse_args(argv)
    trees = parse_trees(args.trees, p.error, reserved=("relay",))
    sizes = [int(x) for x in args.size.split(",")]
    if not all(0 <= s <= 8500 for s in sizes):
        p.error("--size must be 0..8500 (max packet 8800)")
    if args.quick:
        args.rounds, args.seconds = 1, 2.0
    tree_env: dict[str, dict[str, str]] = {}
    if not trees:
        # this tree as installed (its compiled core, the default) and its sources beside it
        if USE_COMPILED and not args.pure_only:
            trees = {"compiled": ROOT, "python": ROOT}
        else:
            if not args.pure_only:
                log("this installation has no compiled core (see setup.py's message at "
                    "install): only the Python sources are measured")
            trees = {"python": ROOT}
        tree_env["python"] = {PURE_ENV: "1"}
    return _run(args, sizes, trees, tree_env)


def _run(args, sizes: list[int], trees: dict[str, Path],
         tree_env: dict[str, dict[str, str]]) -> int:
    line = {}
    for size in sizes:
        log(f"forwarder: {size}-byte Data")
        figures = measure(size, args.window, args.seconds, args.rounds, args.warmup,
                          args.digest, log, args.pin, trees or None, tree_env, args.trace,
                          0x32 if args.segment_names else 0x08)
        figures["quick"] = args.quick
        if not args.no_save:
            save("forwarder", f"size_{size}" + ("_trace" if args.trace else "") +
                 ("_segnames" if args.segment_names else ""), figures)
        line[f"size_{size}"] = {k: figures[k] for k in ("fwd_per_s", "relay_per_s", "ratio")}
        if "trees" in figures:
            line[f"size_{size}"]["trees"] = {lb: {k: f[k] for k in ("fwd_per_s", "ratio")}
                                            for lb, f in figures["trees"].items()}
    emit(line | {"ratio": min(v["ratio"] for v in line.values()), "target": TARGET})
    return 0


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    out = []
    for key in sorted(sec, key=lambda k: int(k.split("_")[1])):
        f = sec[key]
        figure = f"{fmt(f['ratio'], '.3f')} ({f['fwd_per_s']:.0f} vs {f['relay_per_s']:.0f}/s)"
        pure = f.get("trees", {}).get("python")
        if pure and f.get("headline_tree") != "python":       # the sources, in the same run
            figure += f"; pure Python {fmt(pure['ratio'], '.3f')}"
        traced = (", rate trace on" if "_trace" in key else "") + \
            (", segment names" if "_segnames" in key else "")
        verdict = "met" if f["ratio"] >= TARGET else "missed"
        out.append((f"forwarder exchanges/s ÷ uvloop relay, {key.split('_')[1]}-byte Data{traced}",
                    figure, f"≥ {TARGET}", verdict))
    return out


if __name__ == "__main__":
    sys.exit(main())
