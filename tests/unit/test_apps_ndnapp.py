"""ndnps.ndnapp.App, the one adapter over python-ndn's NDNApp: pushed Data reach app code, and
express ends as it should (timeouts, cancellation) despite python-ndn 0.5.2's quirks."""
from __future__ import annotations

import asyncio

import pytest
from ndn import utils
from ndn.appv2 import InterestTreeNode, pass_all
from ndn.encoding import InterestParam, parse_data
from ndn.types import InterestTimeout, ValidResult

from ndnps import names
from ndnps.ndnapp import App
from ndnps.security import DigestSigner


def data(name, content=b"x"):
    wire = App.make_data(name, content, signer=DigestSigner())
    return parse_data(wire)


def pending(app: App, name, validator=pass_all):
    fut = asyncio.get_running_loop().create_future()
    node = app._pit.setdefault(name, InterestTreeNode())
    node.append_interest(fut, utils.timestamp() + 100, InterestParam(), validator, b"")
    return fut, node


@pytest.mark.asyncio
async def test_pushed_data_reaches_on_distribute_without_a_pending_interest():
    seen = []
    app = App("unix:///nonexistent.sock", on_distribute=lambda *a: seen.append(a[0]))
    push = names.distribute("ps", "t1", 4, 0)
    name, meta, content, sig = data(push)
    await app._on_data(name, meta, content, sig, b"")
    await app._on_data(*data(names.collect("w1", "ps", "t1", 4, 0)), b"")   # not a push
    assert [names.parse_distribute(n) for n in seen] == [("ps", "t1", 4, 0)]


@pytest.mark.asyncio
async def test_a_probe_is_satisfied_and_also_seen_as_a_push():
    seen = []
    app = App("unix:///nonexistent.sock", on_distribute=lambda *a: seen.append(a[0]))
    probe = names.distribute("ps", "t1", 4, 1)
    fut, _ = pending(app, probe)
    await app._on_data(*data(probe, b"seg"), b"")
    name, content, _ = await asyncio.wait_for(fut, 1)
    assert bytes(content) == b"seg" and len(seen) == 1


@pytest.mark.asyncio
async def test_data_racing_its_timeout_is_a_timeout_not_a_key_error():
    app = App("unix:///nonexistent.sock")
    name = names.collect("w1", "ps", "t1", 0, 0)

    async def slow_validator(*_):
        await asyncio.sleep(0.3)                 # still validating when the Interest expires
        return ValidResult.PASS
    fut, node = pending(app, name, slow_validator)
    await app._on_data(*data(name), b"")        # removes the PIT node, validation pending
    with pytest.raises(InterestTimeout):
        await app._wait_for_data(fut, utils.timestamp(), name, node)


@pytest.mark.asyncio
async def test_cancelling_an_express_is_a_cancellation():
    app = App("unix:///nonexistent.sock")
    name = names.task("w1", "ps", "t1")
    fut, node = pending(app, name)
    waiter = asyncio.ensure_future(app._wait_for_data(fut, utils.timestamp() + 5000, name, node))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter


def test_counting_face_counts_and_delegates():
    app = App("unix:///nonexistent.sock")
    assert app.traffic() == {"bytes_sent": 0, "bytes_received": 0, "packets_sent": 0,
                             "packets_received": 0}
    assert app.face.isLocalFace() and not app.face.running
