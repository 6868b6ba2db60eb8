"""python -m bench ndntools: ndn-cxx's own consumer through ndnps and through NFD, side by side.

`ndncatchunks` (ndn-tools' CUBIC consumer) fetches one file (20 MB by default) from
`ndnputchunks` (its producer), both on one forwarder's unix socket: NFD, then ndnps as installed
(its compiled core where built), then ndnps's Python sources (NDNPS_PURE=1), round after round.
Each run starts its forwarder afresh and a producer publishing the same file, waits until the
producer answers (ndnpeek), and runs the consumer without -v (per-segment output slows the
consumer enough to change the outcome). Figures per forwarder, from the consumer's statistics:
goodput (Mbit/s), segments retransmitted (and timed out), congestion marks received, RTT, the
forwarder's CPU seconds; the ratio ndnps ÷ NFD per round and of the medians. Targets: goodput
≥ 1.0 × NFD's, ≤ 1 % of segments retransmitted.

NFD, ndn-cxx and ndn-tools are outside programs, built from their sources (not in CI): found
through NDN_PREFIX (an install prefix: bin/nfd, bin/ndncatchunks, ..., lib/) or, one by one,
NFD_BIN (the nfd program), NDN_TOOLS_BIN (the folder of ndncatchunks, ndnputchunks, ndnpeek and
ndnsec) and NFD_LIB (the folder of libndn-cxx, for LD_LIBRARY_PATH); each overrides what
NDN_PREFIX gives. Without them the benchmark says what is missing and skips (exit 0). Without
NFD it still measures ndnps (no ratio).

Writes bench/results.json (key "ndntools") and prints one JSON line last.
"""
from __future__ import annotations

import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, bench_parser, emit, fmt, log, save, stamp
from bench.common import env as _env
from ndnps.forwarder import PURE_ENV, USE_COMPILED
from ndnps.forwarder.status import fetch_status
from ndnps.lab.process import ManagedProcess, _die_with, unix_socket_accepts, wait_until

GOODPUT_TARGET = 1.0            # ndnps ÷ NFD
RETX_TARGET = 1.0               # % of segments retransmitted
PREFIX = "/ndnps-bench/file"
TOOLS = ("ndncatchunks", "ndnputchunks", "ndnpeek", "ndnsec")
DONE_GRACE = 10.0               # s a consumer that printed its statistics has to exit

# NFD's configuration for these runs: a unix socket, no UDP/TCP/WebSocket, no logging; its
# defaults otherwise (congestion marking on, 64 KiB / 100 ms).
NFD_CONF = """\
log
{
  default_level NONE
}
tables
{
  cs_max_packets 65536
  cs_policy lru
  cs_unsolicited_policy drop-all
  strategy_choice
  {
    /               /localhost/nfd/strategy/best-route
    /localhost      /localhost/nfd/strategy/multicast
    /localhost/nfd  /localhost/nfd/strategy/best-route
  }
}
face_system
{
  unix
  {
    path @SOCK@
  }
}
authorizations
{
  authorize
  {
    certfile any
    privileges
    {
      faces
      fib
      cs
      strategy-choice
    }
  }
}
rib
{
  localhost_security
  {
    trust-anchor
    {
      type any
    }
  }
}
"""

# ndncatchunks' statistics (PipelineInterestsAdaptive::printSummary)
STATS = {
    "elapsed_s": r"Time elapsed: ([\d.]+) seconds",
    "segments": r"Segments received: (\d+)",
    "goodput_mbps": r"Goodput: ([\d.]+) Mbit/s",
    "marks": r"Congestion marks: (\d+)",
    "mark_decreases": r"Congestion marks: \d+ \(caused (\d+) window decreases\)",
    "timeouts": r"Timeouts: (\d+)",
    "timeout_decreases": r"Timeouts: \d+ \(caused (\d+) window decreases\)",
    "retransmitted": r"Retransmitted segments: (\d+)",
    "retransmitted_pct": r"Retransmitted segments: \d+ \(([\d.]+)%\)",
    "rtt_min_ms": r"RTT min/avg/max = ([\d.]+)/",
    "rtt_avg_ms": r"RTT min/avg/max = [\d.]+/([\d.]+)/",
    "rtt_max_ms": r"RTT min/avg/max = [\d.]+/[\d.]+/([\d.]+) ms",
}


def parse_stats(text: str) -> dict[str, float]:
    """ndncatchunks' end-of-run statistics (stderr) as numbers; a figure it did not print is
    left out."""
    out: dict[str, float] = {}
    for key, pattern in STATS.items():
        m = re.search(pattern, text)
        if m:
            out[key] = float(m.group(1))
    return out


def locate(environ: dict[str, str] | None = None) -> tuple[dict[str, Path], list[str]]:
    """The programs and library folder from the environment: ({"nfd", "tools", "lib"} as
    found, what is missing). "nfd" missing alone still allows ndnps's runs."""
    environ = dict(os.environ if environ is None else environ)
    prefix = environ.get("NDN_PREFIX")
    want = {"nfd": environ.get("NFD_BIN") or (prefix and str(Path(prefix) / "bin" / "nfd")),
            "tools": environ.get("NDN_TOOLS_BIN") or (prefix and str(Path(prefix) / "bin")),
            "lib": environ.get("NFD_LIB") or (prefix and str(Path(prefix) / "lib"))}
    found: dict[str, Path] = {}
    missing: list[str] = []
    if want["nfd"] and os.access(want["nfd"], os.X_OK):
        found["nfd"] = Path(want["nfd"])
    else:
        missing.append(f"nfd ({want['nfd'] or 'set NFD_BIN or NDN_PREFIX'})")
    tools = Path(want["tools"]) if want["tools"] else None
    absent = [t for t in TOOLS if tools is None or not os.access(tools / t, os.X_OK)]
    if absent:
        missing.append(f"{', '.join(absent)} (in {tools or 'set NDN_TOOLS_BIN or NDN_PREFIX'})")
    elif tools is not None:
        found["tools"] = tools
    if want["lib"] and Path(want["lib"]).is_dir():
        found["lib"] = Path(want["lib"])
    return found, missing


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _faces_status(sock: str) -> dict | None:
    """Our forwarder's faces after a run: the packets they dropped, by reason, and their send
    queues' marks and longest wait (where a segment that timed out went)."""
    try:
        faces = fetch_status(f"unix://{sock}", timeout=3.0)["faces"]
    except (OSError, RuntimeError, KeyError, ValueError):
        return None
    drops: dict[str, int] = {}
    marked, max_delay = 0, 0.0
    for face in faces:
        for reason, n in face["counters"].get("drops", {}).items():
            drops[reason] = drops.get(reason, 0) + n
        q = face.get("send_queue")
        if q:
            marked += q.get("marked", 0)
            max_delay = max(max_delay, q.get("max_delay", 0.0))
    return {"forwarder_drops": drops, "forwarder_marked": marked,
            "forwarder_max_queue_delay_ms": round(1000 * max_delay, 1)}


class Bench:
    """One temporary folder: the file, a HOME with a signing key, and one run after another."""

    def __init__(self, found: dict[str, Path], workdir: Path, megabytes: float,
                 seed: int = 1) -> None:
        self.found = found
        self.dir = workdir
        self.tools = found["tools"]
        self.env = {"HOME": str(workdir / "home")}
        if "lib" in found:
            lib = os.environ.get("LD_LIBRARY_PATH", "")
            self.env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(found["lib"]), lib]))
        (workdir / "home").mkdir(parents=True, exist_ok=True)
        self.file = workdir / "file.bin"
        self.file.write_bytes(random.Random(seed).randbytes(int(megabytes * 1e6)))
        subprocess.run([str(self.tools / "ndnsec"), "key-gen", "/ndnps-bench"], check=True,
                       env={**os.environ, **self.env}, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=60)

    def _forwarder(self, system: str, rundir: Path, sock: str) -> ManagedProcess:
        if system == "nfd":
            conf = rundir / "nfd.conf"
            conf.write_text(NFD_CONF.replace("@SOCK@", sock))
            return ManagedProcess("nfd", [str(self.found["nfd"]), "--config", str(conf)],
                                  rundir / "nfd.log", env=self.env)
        env = {**_env(), **({PURE_ENV: "1"} if system == "ndnps-python" else {})}
        return ManagedProcess("forwarder", [sys.executable, "-m", "ndnps.forwarder", "--unix", sock,
                                            "--tcp", "0", "--udp", "0", "--log-level", "WARNING"],
                              rundir / "forwarder.log", env=env, cwd=str(ROOT))

    def run(self, system: str, tag: str, timeout: float = 180.0) -> dict:
        """One fetch of the file through `system` ("nfd", "ndnps", "ndnps-python")."""
        rundir = self.dir / f"{system}-{tag}"
        rundir.mkdir(parents=True)
        sock = str(rundir / "fwd.sock")
        env = {**os.environ, **self.env, "NDN_CLIENT_TRANSPORT": f"unix://{sock}"}
        fwd = self._forwarder(system, rundir, sock)
        producer: subprocess.Popen | None = None
        out = rundir / "fetched.bin"
        try:
            wait_until(lambda: unix_socket_accepts(sock), 30, fwd, "listening")
            with open(self.file, "rb") as stdin, open(rundir / "producer.log", "wb") as log_:
                producer = subprocess.Popen([str(self.tools / "ndnputchunks"), PREFIX],
                                            stdin=stdin, stdout=log_, stderr=log_, env=env,
                                            start_new_session=True,
                                            preexec_fn=_die_with(os.getpid()))
            self._wait_published(producer, env)
            cpu0 = _cpu_seconds(fwd.pid)
            child0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            rc, hung = self._consume(rundir, out, env, timeout)
            wall = time.monotonic() - t0
            child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu1 = _cpu_seconds(fwd.pid)
            faces = None if system == "nfd" else _faces_status(sock)
            text = (rundir / "consumer.log").read_text(errors="replace")
            if rc != 0:
                raise RuntimeError(f"ndncatchunks through {system} exited {rc}:\n{text[-1500:]}")
            if out.read_bytes() != self.file.read_bytes():
                raise RuntimeError(f"ndncatchunks through {system}: the file differs")
            if fwd.poll() is not None or producer.poll() is not None:
                raise RuntimeError(f"the forwarder or the producer exited during the run "
                                   f"({fwd.poll()}, {producer.poll()}):\n{fwd.tail(10)}")
            stats: dict[str, float | bool | None] = dict(parse_stats(text))
            stats["wall_s"] = round(wall, 3)
            if hung:
                stats["hung_after_done"] = True
            stats["consumer_cpu_s"] = round(child1.ru_utime + child1.ru_stime
                                            - child0.ru_utime - child0.ru_stime, 3)
            stats["forwarder_cpu_s"] = (None if cpu0 is None or cpu1 is None
                                        else round(cpu1 - cpu0, 3))
            if faces is not None:
                stats.update(faces)
            return stats
        finally:
            if producer is not None:
                producer.terminate()
                try:
                    producer.wait(5)
                except subprocess.TimeoutExpired:
                    producer.kill()
                    producer.wait(5)
            fwd.stop()
            try:
                out.unlink()
            except OSError:
                pass

    def _consume(self, rundir: Path, out: Path, env: dict[str, str],
                 timeout: float) -> tuple[int, bool]:
        """ndncatchunks, to its end: (exit code, whether it was stopped after it had printed
        its statistics; under a heavy load it was seen to hang there, once, for minutes)."""
        log_path = rundir / "consumer.log"
        with open(out, "wb") as stdout, open(log_path, "wb") as stderr:
            proc = subprocess.Popen([str(self.tools / "ndncatchunks"), PREFIX], stdout=stdout,
                                    stderr=stderr, env=env, preexec_fn=_die_with(os.getpid()))
        deadline = time.monotonic() + timeout
        done_at: float | None = None
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if now > deadline:
                    raise RuntimeError(f"ndncatchunks did not end within {timeout:.0f} s")
                if done_at is None and "Goodput:" in log_path.read_text(errors="replace"):
                    done_at = now
                if done_at is not None and now - done_at > DONE_GRACE:
                    proc.kill()
                    proc.wait()
                    return 0, True
                time.sleep(0.05)
            return proc.returncode, False
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def _wait_published(self, producer: subprocess.Popen, env: dict[str, str],
                        timeout: float = 60.0) -> None:
        """Until the producer answers through the forwarder (it segments and signs the whole
        file before it registers its prefix): ndnpeek for the file's name, which the producer
        answers with its first segment."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if producer.poll() is not None:
                raise RuntimeError(f"ndnputchunks exited {producer.poll()} before answering")
            run = subprocess.run([str(self.tools / "ndnpeek"), "-P", "-w", "500", "-l", "500",
                                  PREFIX], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, timeout=30)
            if run.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"ndnputchunks not answering within {timeout:.0f} s")


def summarise(runs: list[dict]) -> dict:
    """One forwarder's runs: each figure's median, and goodput's and retransmissions' spread."""
    def col(key: str) -> list[float]:
        return [r[key] for r in runs if r.get(key) is not None]
    out: dict = {"runs": runs}
    for key in ("goodput_mbps", "retransmitted_pct", "retransmitted", "timeouts", "marks",
                "rtt_avg_ms", "rtt_max_ms", "forwarder_cpu_s", "consumer_cpu_s", "elapsed_s"):
        vals = col(key)
        out[key] = round(statistics.median(vals), 3) if vals else None
    for key in ("goodput_mbps", "retransmitted_pct"):
        vals = col(key)
        out[f"{key}_range"] = [min(vals), max(vals)] if vals else None
    return out


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("python -m bench ndntools", __doc__, "2 rounds of a 5 MB file", rounds=5)
    p.add_argument("--mb", type=float, default=20.0, help="file size, MB (default 20)")
    p.add_argument("--systems", default="",
                   help="comma-separated of nfd, ndnps, ndnps-python (default: every one "
                        "available; ndnps-python only where ndnps runs a compiled core)")
    args = p.parse_args(argv)
    found, missing = locate()
    if "tools" not in found:
        log(f"ndntools: skipped: ndn-tools not found: {'; '.join(missing)}")
        emit({"bench": "ndntools", "skipped": "; ".join(missing)})
        return 0
    if args.quick:
        args.rounds, args.mb = 2, 5.0
    systems = args.systems.split(",") if args.systems else \
        ["nfd", "ndnps"] + (["ndnps-python"] if USE_COMPILED else [])
    unknown = [x for x in systems if x not in ("nfd", "ndnps", "ndnps-python")]
    if unknown:
        p.error(f"--systems: unknown {unknown[0]!r}")
    if "nfd" in systems and "nfd" not in found:
        log(f"ndntools: NFD not found ({'; '.join(missing)}): ndnps alone, no ratio")
        systems.remove("nfd")
    builds = {"ndnps": "mypyc" if USE_COMPILED else "python", "ndnps-python": "python"}
    if not USE_COMPILED:
        log("ndntools: this installation has no compiled core: ndnps runs its Python sources")
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-ndntools-"))
    workdir.mkdir(parents=True, exist_ok=True)
    load = [os.getloadavg()[0]]
    runs: dict[str, list[dict]] = {x: [] for x in systems}
    try:
        bench = Bench(found, workdir, args.mb)
        for r in range(args.rounds):
            for system in systems:
                try:
                    res = bench.run(system, f"r{r}")
                except Exception as e:                  # noqa: BLE001 - one retry
                    log(f"round {r + 1} {system}: failed ({e}); retrying once")
                    res = bench.run(system, f"r{r}-retry")
                res["load"] = round(os.getloadavg()[0], 2)
                runs[system].append(res)
                log(f"round {r + 1}/{args.rounds} {system:12s} {res.get('goodput_mbps', 0):6.1f} "
                    f"Mbit/s  retx {res.get('retransmitted_pct', 0):5.2f} % "
                    f"(timeouts {res.get('timeouts', 0):.0f})  marks {res.get('marks', 0):.0f}  "
                    f"rtt avg {res.get('rtt_avg_ms', 0):.1f} ms  fwd cpu "
                    f"{fmt(res.get('forwarder_cpu_s'), '.2f')} s  load {res['load']}"
                    + (f"  drops {res['forwarder_drops']}  queue max "
                       f"{res['forwarder_max_queue_delay_ms']} ms"
                       if "forwarder_drops" in res else ""))
    finally:
        load.append(os.getloadavg()[0])
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    figures: dict = {**stamp(), "quick": args.quick, "mb": args.mb, "rounds": args.rounds,
                     "load": [round(x, 2) for x in load], "builds": builds,
                     "systems": {x: summarise(runs[x]) for x in systems}}
    line: dict = {"bench": "ndntools"}
    for x in systems:
        sec = figures["systems"][x]
        line[x] = {k: sec[k] for k in ("goodput_mbps", "retransmitted_pct", "marks")}
    if "nfd" in systems:
        nfd = [r.get("goodput_mbps") for r in runs["nfd"]]
        for x in systems:
            if x == "nfd":
                continue
            per_round = [round(a["goodput_mbps"] / b, 3)
                         for a, b in zip(runs[x], nfd) if b and "goodput_mbps" in a]
            sec = figures["systems"][x]
            sec["ratio"] = round(sec["goodput_mbps"] / figures["systems"]["nfd"]["goodput_mbps"],
                                 3) if sec["goodput_mbps"] and \
                figures["systems"]["nfd"]["goodput_mbps"] else None
            sec["ratio_per_round"] = per_round
            line[x]["ratio"] = sec["ratio"]
    line["targets"] = {"ratio": GOODPUT_TARGET, "retransmitted_pct": RETX_TARGET}
    if not args.no_save:
        save("ndntools", None, figures)
    emit(line)
    return 0


def rows(sec: dict) -> list[tuple[str, str, str, str]]:
    systems = sec.get("systems", {})
    nfd = systems.get("nfd")
    out = []
    for x in ("ndnps", "ndnps-python"):
        f = systems.get(x)
        if not f:
            continue
        build = sec.get("builds", {}).get(x, "")
        lo, hi = f.get("goodput_mbps_range") or (None, None)
        figure = (f"{fmt(f.get('ratio'), '.2f')} ({fmt(f['goodput_mbps'], '.0f')} Mbit/s, "
                  f"{fmt(lo, '.0f')}–{fmt(hi, '.0f')}; NFD "
                  f"{fmt(nfd and nfd['goodput_mbps'], '.0f')}); retransmitted "
                  f"{fmt(f['retransmitted_pct'], '.2f')} % (NFD "
                  f"{fmt(nfd and nfd['retransmitted_pct'], '.2f')} %); marks {fmt(f['marks'])}")
        ok = (f.get("ratio") or 0) >= GOODPUT_TARGET and \
            (f.get("retransmitted_pct") or 0) <= RETX_TARGET
        out.append((f"ndncatchunks {sec.get('mb', 20):g} MB through ndnps ({build}) ÷ NFD: "
                    f"goodput; retransmitted", figure,
                    f"≥ {GOODPUT_TARGET}; ≤ {RETX_TARGET} %", "met" if ok else "missed"))
    return out
