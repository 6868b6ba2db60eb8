"""Interop with NDNts (https://yoursunny.com/p/NDNts/), an NDN stack no one here wrote.

The NDNts scripts live in tests/interop/ndnts/ (package.json + package-lock.json pin every
package). The `ndnts` fixture installs them once per package set:

- cache: $NDNPS_NDNTS_CACHE, else $XDG_CACHE_HOME/ndnps-ndnts/ (default ~/.cache/...), one
  directory per hash of package.json, package-lock.json and the Node.js major version;
  `npm ci` runs there once (under a file lock, into a temporary directory renamed into place
  when complete) and is reused afterwards;
- each test session copies the scripts into its own temporary directory beside a symlink to
  the cached node_modules (ESM `import` resolves packages from the script's directory, not from
  NODE_PATH), so editing a script never needs a reinstall.

Skipped only when `node` or `npm` is not installed. If they are present and the install fails,
the tests fail.

The scripts use NDNts with strict PIT-token matching (common.mjs): a Data the forwarder returns
without the PitToken of its Interest is dropped by the client, so every exchange below also
checks that the forwarder echoes NDNLPv2 PIT tokens.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ndnps.forwarder.status import fetch_status
from ndnps.lab.demo import CONSUMER as PY_CONSUMER, PRODUCER as PY_PRODUCER
from ndnps.lab.process import free_port, wait_until

# The first run may include `npm ci` (a few seconds on a warm npm cache, more on a slow
# registry); every wait inside a test is much shorter than this.
pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.timeout(300)]

NDNTS_SRC = Path(__file__).resolve().parent.parent / "interop" / "ndnts"
SCRIPTS = ("common.mjs", "producer.mjs", "consumer.mjs", "serve-object.mjs", "fetch-object.mjs",
           "mgmt.mjs")
NPM_TIMEOUT = 240


class NdnTs:
    """Runs the NDNts scripts of one test session as managed processes."""

    def __init__(self, node: str, workdir: Path) -> None:
        self.node = node
        self.workdir = workdir

    def spawn(self, procs, name: str, script: str, *args: str, sock: str,
              wait_ready: bool = False, env: dict[str, str] | None = None):
        full_env = {"NDN_CLIENT_TRANSPORT": sock if "://" in sock else f"unix://{sock}"}
        full_env.update(env or {})
        proc = procs.spawn(name, [self.node, str(self.workdir / script), *args], env=full_env)
        if wait_ready:
            wait_until(lambda: "READY" in proc.tail(), 20, proc, "registered")
        return proc


def _cache_key(node: str) -> str:
    h = hashlib.sha256()
    for f in ("package.json", "package-lock.json"):
        h.update((NDNTS_SRC / f).read_bytes())
    major = subprocess.run([node, "--version"], capture_output=True, text=True,
                           timeout=30).stdout.strip().split(".")[0]
    h.update(major.encode())
    return h.hexdigest()[:16]


def _install(npm: str, node: str) -> Path:
    """The directory holding node_modules for the pinned packages, installing it if needed."""
    root = Path(os.environ.get("NDNPS_NDNTS_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ndnps-ndnts")
    root.mkdir(parents=True, exist_ok=True)
    target = root / _cache_key(node)
    stamp = target / ".installed"
    if stamp.exists():
        return target
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)             # one installer at a time (xdist, CI)
        if stamp.exists():
            return target
        for leftover in root.glob("staging-*"):      # from an install that was killed
            shutil.rmtree(leftover, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix="staging-", dir=root))
        try:
            for f in ("package.json", "package-lock.json"):
                shutil.copy2(NDNTS_SRC / f, staging / f)
            argv = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=warn"]
            t0 = time.monotonic()
            try:
                res = subprocess.run(argv, cwd=staging, capture_output=True, text=True,
                                     timeout=NPM_TIMEOUT)
            except subprocess.TimeoutExpired:
                pytest.fail(f"`npm ci` for NDNts did not finish in {NPM_TIMEOUT} s", False)
            if res.returncode != 0:
                pytest.fail(f"`npm ci` for NDNts failed ({res.returncode}):\n"
                            f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}", False)
            (staging / ".installed").write_text(f"npm ci took {time.monotonic() - t0:.1f} s\n")
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


@pytest.fixture(scope="session")
def ndnts(tmp_path_factory) -> NdnTs:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("NDNts interop needs Node.js (>= 20) and npm on PATH; "
                    f"node={node or 'missing'} npm={npm or 'missing'}")
    installed = _install(npm, node)
    workdir = tmp_path_factory.mktemp("ndnts")
    for script in SCRIPTS:
        shutil.copy2(NDNTS_SRC / script, workdir / script)
    shutil.copy2(NDNTS_SRC / "package.json", workdir / "package.json")   # "type": "module"
    (workdir / "node_modules").symlink_to(installed / "node_modules", target_is_directory=True)
    return NdnTs(node, workdir)


# ---- python-ndn sides (same shape as tests/integration/test_forwarder_pyndn.py) ---------------




def _py(procs, name, script, sock, *args, wait_ready=False):
    proc = procs.spawn(name, [sys.executable, "-c", script, *args],
                       env={"NDN_CLIENT_TRANSPORT": f"unix://{sock}"})
    if wait_ready:
        wait_until(lambda: "READY" in proc.tail(), 15, proc, "registered")
    return proc


def _output(proc, timeout=20) -> str:
    proc.wait(timeout)
    return proc.tail()


# ---- tests --------------------------------------------------------------------------------------
# NDNts prints names in canonical URI form: a generic component "hello" is "8=hello".

def test_ndnts_producer_and_ndnts_consumer(procs, ndnts):
    sock = procs.forwarder()
    producer = ndnts.spawn(procs, "producer", "producer.mjs", "/hello", sock=sock,
                           wait_ready=True)
    consumer = ndnts.spawn(procs, "consumer", "consumer.mjs", "/hello/world", sock=sock)
    assert "DATA /8=hello/8=world hello from /hello" in _output(consumer)
    assert "INTEREST /8=hello/8=world" in producer.tail()


def test_cs_hit_echoes_the_new_consumers_token(procs, ndnts):
    """The second consumer is answered from the Content Store after the producer is gone: the
    cached Data must go back with the second consumer's PIT token, or NDNts drops it."""
    sock = procs.forwarder()
    producer = ndnts.spawn(procs, "producer", "producer.mjs", "/cached", sock=sock,
                           wait_ready=True)
    first = ndnts.spawn(procs, "consumer1", "consumer.mjs", "/cached/item", sock=sock)
    assert "DATA /8=cached/8=item hello from /cached" in _output(first)
    producer.stop()
    second = ndnts.spawn(procs, "consumer2", "consumer.mjs", "/cached/item", sock=sock)
    assert "DATA /8=cached/8=item hello from /cached" in _output(second)
    assert fetch_status(f"unix://{sock}")["counters"]["cs_hits"] == 1


def test_ndnts_producer_over_tcp(procs, ndnts):
    """The producer registers over a loopback TCP face (NDNts and the forwarder both take it
    as local: /localhost/nfd); the consumer comes in on the unix socket."""
    port = free_port()
    sock = procs.forwarder(tcp=port)
    ndnts.spawn(procs, "producer", "producer.mjs", "/viatcp", sock=f"tcp://127.0.0.1:{port}",
                wait_ready=True)
    consumer = ndnts.spawn(procs, "consumer", "consumer.mjs", "/viatcp/x", sock=sock)
    assert "DATA /8=viatcp/8=x hello from /viatcp" in _output(consumer)


def test_ndnts_producer_and_pyndn_consumer(procs, ndnts):
    sock = procs.forwarder()
    ndnts.spawn(procs, "producer", "producer.mjs", "/ndnts", sock=sock, wait_ready=True)
    consumer = _py(procs, "consumer", PY_CONSUMER, sock, "/ndnts/from/python")
    assert "DATA /ndnts/from/python hello from /ndnts" in _output(consumer)


def test_pyndn_producer_and_ndnts_consumer(procs, ndnts):
    sock = procs.forwarder()
    _py(procs, "producer", PY_PRODUCER, sock, "/py", wait_ready=True)
    consumer = ndnts.spawn(procs, "consumer", "consumer.mjs", "/py/from/ndnts", sock=sock)
    assert "DATA /8=py/8=from/8=ndnts hello from /py" in _output(consumer)


def test_ndnts_consumer_sees_nack_no_route(procs, ndnts):
    sock = procs.forwarder()
    consumer = ndnts.spawn(procs, "consumer", "consumer.mjs", "/nobody/home", sock=sock)
    assert "NACK 150" in _output(consumer)


def test_ndnts_segmented_object_1mb(procs, ndnts):
    """1 MiB of random bytes served by @ndn/segmented-object (versioned, 4 KiB segments) and
    fetched through the forwarder by its pipelined fetcher (version discovery included)."""
    sock = procs.forwarder()
    payload = os.urandom(1 << 20)
    src, dst = procs.workdir / "object.bin", procs.workdir / "fetched.bin"
    src.write_bytes(payload)
    ndnts.spawn(procs, "server", "serve-object.mjs", "/big/object", str(src), sock=sock,
                wait_ready=True)
    fetcher = ndnts.spawn(procs, "fetcher", "fetch-object.mjs", "/big/object", str(dst),
                          sock=sock, env={"NDNTS_FETCH_DEADLINE_MS": "60000"})
    out = _output(fetcher, timeout=70)
    assert "FETCHED /8=big/8=object/54=" in out, out
    fields = out.split("FETCHED ", 1)[1].split()
    assert int(fields[1]) == len(payload)
    assert int(fields[2]) == 256                    # segments
    assert dst.read_bytes() == payload
    status = fetch_status(f"unix://{sock}")
    for face in status["faces"]:
        drops = face["counters"]["drops"]
        # nothing NDNts sent was unreadable or unexpected
        assert not {"malformed", "lp_idle", "lp_fragment", "unsolicited_data"} & set(drops), face


def test_ndnts_management_client(procs, ndnts):
    """NDNts's @ndn/nfdmgmt as an nfdc: control commands (signed Interest v0.3, parameters in
    the name) and status datasets decoded by NDNts's own TLV models."""
    sock = procs.forwarder()
    client = ndnts.spawn(procs, "mgmt", "mgmt.mjs", sock=sock)
    client.wait(40)
    steps = {}
    for line in client.log_path.read_text().splitlines():
        if line.startswith("{"):
            item = json.loads(line)
            steps[item.pop("step")] = item
    assert "error" not in steps, steps["error"]["message"]
    assert "done" in steps, client.tail()
    assert steps["general"]["n"] == 1 and steps["general"]["nfdVersion"]
    reg = steps["register"]
    assert (reg["code"], reg["name"], reg["origin"], reg["cost"]) == (200, "/8=nfdc/8=test",
                                                                       255, 7)
    face_id = reg["faceId"]
    [route] = steps["routes-after-register"]["routes"]
    assert (route["faceId"], route["origin"], route["cost"]) == (face_id, 255, 7)
    assert 0 < route["expirationPeriod"] <= 60000
    assert face_id in [f["faceId"] for f in steps["faces"]["faces"]]
    assert any(c["name"] == "/" for c in steps["strategies"]["choices"])
    assert steps["unregister"]["code"] == 200
    assert steps["routes-after-unregister"]["routes"] == []
    assert steps["bad-strategy"]["code"] == 404
