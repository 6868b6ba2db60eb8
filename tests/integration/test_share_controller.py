"""The share controller as a process (ndnps.apps.controller) behind a real forwarder, asked by job
nodes (ndnps/apps/common/share.py) over real sockets: one decision per round for every node of a
job, rule s1 of docs/sharing.md (another job holds the aggregators: the ordinary way), release on
done, a bad configuration named, and a dead controller leaving the rounds to the ordinary way."""
from __future__ import annotations

import asyncio
import json
import sys

import pytest

from ndnps.apps.common.share import Share
from ndnps.client.app import App
from ndnps.client.security import Security
from ndnps.lab.process import wait_until
from ndnps.protocol import names
from ndnps.protocol.config import from_table

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

PEERS = {"ps": "ja", "train": "t", "workers": ["p1", "p2"], "collective": "ina",
         "aggregate_at": "fwd", "key": "ka", "share_controller": "ctl", "share_patience": 1.0}
PS_JOB = {"ps": "psb", "train": "t", "workers": ["w1"], "aggregate_at": "fwd", "key": "kb",
          "share_controller": "ctl", "share_patience": 1.0}

CONFIG = """
[share]
name = "ctl"
policy = "time-division"
slot_timeout = 1.0

[[jobs]]
ps = "ja"
train = "t"
workers = ["p1", "p2"]
collective = "ina"
aggregate_at = "fwd"
key = "ka"

[[jobs]]
ps = "psb"
train = "t"
workers = ["w1"]
aggregate_at = "fwd"
key = "kb"
"""


async def _node(sock: str, table: dict, node: str) -> tuple[Share, App, asyncio.Task]:
    cfg = from_table(table)
    who = cfg.who
    app = App(f"unix://{sock}")
    await app.face.open()
    task = asyncio.create_task(app.face.run())
    return Share(who, cfg.sharing, app, node,
                 Security(who.key_bytes, names.key(who.ps, who.train)).validator), \
        app, task


def _controller(procs, config: str):
    path = procs.workdir / "share.toml"
    path.write_text(config)
    return procs.spawn("ctl", [sys.executable, "-m", "ndnps.apps.controller", "--config", str(path),
                               "--metrics", str(procs.workdir / "ctl.jsonl")],
                       env={"NDN_CLIENT_TRANSPORT": f"unix://{procs.workdir}/fwd.sock"})


async def test_jobs_take_the_aggregators_in_turns_and_a_dead_controller_is_survived(procs):
    sock = procs.forwarder("fwd")
    ctl = _controller(procs, CONFIG)
    wait_until(lambda: "ready" in ctl.tail(5), 20, ctl, "ready")
    (p1, a1, t1), (p2, a2, t2), (ps, a3, t3) = [
        await _node(sock, PEERS, "p1"), await _node(sock, PEERS, "p2"),
        await _node(sock, PS_JOB, "psb")]
    try:
        # both peers of job a ask for round 0: one decision, the same for both
        d1, d2 = await asyncio.gather(p1.ask(0), p2.ask(0))
        assert (d1.use, d2.use, d1.why) == (True, True, "aggregate")
        # job b's round while a holds them: the ordinary way, at once (s1)
        db = await ps.ask(0)
        assert (db.use, db.why) == (False, "ordinary") and db.wait < 0.5
        # a's round is over (both say so): b's next round gets them
        p1.done(0, True)
        p2.done(0, True)
        await asyncio.sleep(0.3)
        db = await ps.ask(1)
        assert db.use is True
        # the controller dies: the next round goes the ordinary way after share_patience,
        # the one after it after one Interest lifetime, and nothing hangs
        ctl.stop()
        d = await ps.ask(2)
        assert (d.use, d.why) == (False, "unreachable") and 0.9 < d.wait < 2.0
        d = await ps.ask(3)
        assert (d.use, d.why) == (False, "unreachable") and d.wait < 0.9
        assert ps.unreachable_rounds == 2
    finally:
        for app in (a1, a2, a3):
            app.shutdown()
        for t in (t1, t2, t3):
            t.cancel()
        await asyncio.gather(t1, t2, t3, return_exceptions=True)
    records = [json.loads(line) for line in (procs.workdir / "ctl.jsonl").read_text().splitlines()]
    decisions = [(r["job"], r["round"], r["verdict"]) for r in records
                 if r.get("event") == "decision"]
    assert decisions == [("ja/t", 0, "aggregate"), ("psb/t", 0, "ordinary"),
                         ("psb/t", 1, "aggregate")]


def test_a_bad_configuration_names_the_key(procs):
    procs.forwarder("fwd")
    ctl = _controller(procs, CONFIG.replace('policy = "time-division"', 'policy = "fifo"'))
    assert ctl.wait(20) == 2
    assert "share.policy" in ctl.tail(5)
    ctl = _controller(procs, CONFIG.replace('key = "kb"', 'key = "kb"\nlr = "fast"'))
    assert ctl.wait(20) == 2
    assert "jobs[1].lr" in ctl.tail(5)
