"""`python -m forwarder status` as a user runs it: one line naming the transport when no
forwarder answers, and quiet when the reader of its output goes away (`| head`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ndnps.lab.process import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


def _status(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forwarder", "status", *args],
                          capture_output=True, text=True, timeout=30, **kw)


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_no_forwarder_is_one_line_naming_the_transport(tmp_path, transport):
    if transport == "unix":
        uri = f"unix://{tmp_path}/nobody.sock"
    else:
        uri = f"tcp://127.0.0.1:{free_port()}"
    proc = _status("--transport", uri)
    assert proc.returncode == 1
    assert proc.stdout == ""
    # one line of ours (Python may warn first, e.g. of a stale compiled core)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("forwarder status:")]
    assert len(errors) == 1 and uri in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_forwarder_at_the_default_transport_names_it(tmp_path):
    uri = f"unix://{tmp_path}/default.sock"
    proc = _status(env={**os.environ, "NDN_CLIENT_TRANSPORT": uri})
    assert proc.returncode == 1 and uri in proc.stderr and "Traceback" not in proc.stderr


def test_bad_transport_is_a_usage_error():
    proc = _status("--transport", "http://127.0.0.1:80")
    assert proc.returncode == 2
    assert "http://127.0.0.1:80" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("fmt", [["--json"], []])
def test_a_closed_pipe_is_quiet(procs, fmt):
    """Its reader gone before it writes a byte, as `| head -1` would be for a longer output:
    no BrokenPipeError traceback, exit 1 (what Python's docs recommend)."""
    sock = procs.forwarder()
    read_end, write_end = os.pipe()
    os.close(read_end)                      # no reader at all: the first write fails
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "forwarder", "status", "--transport", f"unix://{sock}", *fmt],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=30)
    finally:
        os.close(write_end)
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1


def test_status_json_has_the_udp_face_counters(procs):
    sock = procs.forwarder()
    proc = _status("--json", "--transport", f"unix://{sock}")
    assert proc.returncode == 0, proc.stderr
    assert '"udp_faces_evicted": 0' in proc.stdout and '"udp_faces_rejected": 0' in proc.stdout


def test_status_shows_an_aggregators_counters(procs):
    from ndnps.lab import ina
    from ndnps.protocol.config import from_table
    sock = procs.forwarder()
    ina.configure(f"unix://{sock}", from_table({"ps": "ps", "train": "t1", "key": "k"}), "edge",
                  64)
    proc = _status("--transport", f"unix://{sock}")
    assert proc.returncode == 0, proc.stderr
    assert "aggregation: sums 0 of 0 asked" in proc.stdout
    assert "training /ps/t1 as edge: 0/64 slots held" in proc.stdout
    js = json.loads(_status("--json", "--transport", f"unix://{sock}").stdout)
    assert js["aggregation"]["trainings"][0]["training"] == "/ps/t1"
