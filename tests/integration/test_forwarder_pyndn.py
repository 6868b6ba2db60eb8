"""python-ndn clients (appv2 and the legacy NDNApp) against a real forwarder process."""
from __future__ import annotations

import sys
import textwrap

import pytest

from ndnps.lab.demo import CONSUMER, PRODUCER

pytestmark = pytest.mark.slow

LEGACY_PRODUCER = textwrap.dedent('''
    import sys
    from ndn.app import NDNApp
    from ndn.security import KeychainDigest
    app = NDNApp(keychain=KeychainDigest())

    @app.route(sys.argv[1])
    def on_interest(name, param, app_param):
        app.put_data(name, b"legacy " + sys.argv[1].encode(), freshness_period=1000)

    async def ready():
        print("READY", flush=True)
    app.run_forever(after_start=ready())
''')

LEGACY_CONSUMER = textwrap.dedent('''
    import sys
    from ndn.app import NDNApp
    from ndn.encoding import Name
    from ndn.security import KeychainDigest
    app = NDNApp(keychain=KeychainDigest())

    async def main():
        try:
            name, meta, content = await app.express_interest(sys.argv[1], lifetime=2000,
                                                             must_be_fresh=False)
            print("DATA", Name.to_str(name), bytes(content).decode(), flush=True)
        finally:
            app.shutdown()
    app.run_forever(after_start=main())
''')


def _run(procs, name, script, sock, *args, wait_ready=False):
    env = {"NDN_CLIENT_TRANSPORT": f"unix://{sock}"}
    proc = procs.spawn(name, [sys.executable, "-c", script, *args], env=env)
    if wait_ready:
        from ndnps.lab.process import wait_until
        wait_until(lambda: "READY" in proc.tail(), 15, proc, "registered")
    return proc


def _output(proc, timeout=20) -> str:
    proc.wait(timeout)
    return proc.tail()


def test_appv2_producer_and_consumer_exchange(procs):
    sock = procs.forwarder()
    _run(procs, "producer", PRODUCER, sock, "/hello", wait_ready=True)
    consumer = _run(procs, "consumer", CONSUMER, sock, "/hello/world")
    assert "DATA /hello/world hello from /hello" in _output(consumer)


def test_legacy_app_with_keychain_digest(procs):
    sock = procs.forwarder()
    _run(procs, "producer", LEGACY_PRODUCER, sock, "/legacy", wait_ready=True)
    consumer = _run(procs, "consumer", LEGACY_CONSUMER, sock, "/legacy/x")
    assert "DATA /legacy/x legacy /legacy" in _output(consumer)


def test_unrouted_name_is_nacked_no_route(procs):
    sock = procs.forwarder()
    consumer = _run(procs, "consumer", CONSUMER, sock, "/nobody/home")
    assert "NACK 150" in _output(consumer)


FULL_NAME_CONSUMER = textwrap.dedent('''
    import hashlib, sys
    from ndn.appv2 import NDNApp, pass_all
    from ndn.encoding import Component, Name
    from ndn.types import InterestTimeout
    app = NDNApp()

    async def main():
        try:
            name = Name.from_str(sys.argv[1])
            _, _, ctx = await app.express(name, validator=pass_all, lifetime=3000)
            digest = hashlib.sha256(bytes(ctx["raw_packet"])).digest()
            # python-ndn checks the digest of what answers: only the same Data does
            full = name + [Component.from_bytes(digest, Component.TYPE_IMPLICIT_SHA256)]
            _, content, _ = await app.express(full, validator=pass_all, lifetime=3000)
            print("FULL", bytes(content).decode(), flush=True)
            wrong = name + [Component.from_bytes(bytes(32), Component.TYPE_IMPLICIT_SHA256)]
            try:
                await app.express(wrong, validator=pass_all, lifetime=500)
            except InterestTimeout:
                print("WRONG timeout", flush=True)
        finally:
            app.shutdown()
    app.run_forever(after_start=main())
''')


def test_a_full_name_with_implicit_digest_is_answered_from_the_cs(procs):
    sock = procs.forwarder()
    _run(procs, "producer", PRODUCER, sock, "/hello", wait_ready=True)
    consumer = _run(procs, "consumer", FULL_NAME_CONSUMER, sock, "/hello/world")
    out = _output(consumer)
    assert "FULL hello from /hello" in out and "WRONG timeout" in out


HINT_PRODUCER = textwrap.dedent('''
    from ndn.appv2 import NDNApp
    from ndn.security import DigestSha256Signer
    app = NDNApp()
    signer = DigestSha256Signer()

    def on_interest(name, param, reply, context):
        reply(app.make_data(name, b"via the hint", signer=signer, freshness_period=1000))

    async def ready():
        app.attach_handler("/data", on_interest)      # dispatched by name, not registered
        await app.register("/isp/site")               # the forwarder knows only this route
        print("READY", flush=True)
    app.run_forever(after_start=ready())
''')

HINT_CONSUMER = textwrap.dedent('''
    import sys
    from ndn.appv2 import NDNApp, pass_all
    from ndn.types import InterestNack
    app = NDNApp()

    async def main():
        try:
            try:
                await app.express("/data/x", validator=pass_all, lifetime=2000)
            except InterestNack as e:
                print("BARE NACK", e.reason, flush=True)
            _, content, _ = await app.express("/data/x", validator=pass_all, lifetime=2000,
                                              forwarding_hint=["/isp/site"])
            print("HINTED", bytes(content).decode(), flush=True)
        finally:
            app.shutdown()
    app.run_forever(after_start=main())
''')


def test_a_forwarding_hint_reaches_a_producer_only_its_delegation_is_routed_to(procs):
    sock = procs.forwarder()
    _run(procs, "producer", HINT_PRODUCER, sock, wait_ready=True)
    consumer = _run(procs, "consumer", HINT_CONSUMER, sock)
    out = _output(consumer)
    assert "BARE NACK 150" in out and "HINTED via the hint" in out


SEGMENT_PRODUCER = textwrap.dedent('''
    import hashlib
    from ndn.appv2 import NDNApp
    from ndn.encoding import Component, Name
    from ndn.security import DigestSha256Signer
    app = NDNApp()
    signer = DigestSha256Signer()
    blob = hashlib.shake_256(b"ndnps").digest(1 << 20)
    segs = [blob[i:i + 8000] for i in range(0, len(blob), 8000)]
    prefix = Name.from_str("/big/v=1")

    @app.route("/big")
    def on_interest(name, param, reply, context):
        seg = Component.to_number(name[-1]) if len(name) == 3 else 0
        if seg >= len(segs):
            return
        reply(app.make_data(prefix + [Component.from_segment(seg)], segs[seg], signer=signer,
                            final_block_id=Component.from_segment(len(segs) - 1)))

    async def ready():
        print("READY", flush=True)
    app.run_forever(after_start=ready())
''')

SEGMENT_CONSUMER = textwrap.dedent('''
    import hashlib
    from ndn.app import NDNApp
    from ndn.app_support.segment_fetcher import segment_fetcher
    from ndn.security import KeychainDigest
    app = NDNApp(keychain=KeychainDigest())

    async def main():
        try:
            got = b"".join([bytes(s) async for s in segment_fetcher(app, "/big")])
            ok = got == hashlib.shake_256(b"ndnps").digest(1 << 20)
            print("FETCHED", len(got), "OK" if ok else "MISMATCH", flush=True)
        finally:
            app.shutdown()
    app.run_forever(after_start=main())
''')


def test_one_megabyte_segmented_through_two_forwarders_over_udp(procs):
    from ndnps.lab.process import free_port
    port_a, port_b = free_port(), free_port()
    conf_a = procs.workdir / "a.toml"
    conf_a.write_text(f'[[faces]]\nname = "b"\nuri = "udp4://127.0.0.1:{port_b}"\n')
    conf_b = procs.workdir / "b.toml"
    conf_b.write_text(f'[[faces]]\nname = "a"\nuri = "udp4://127.0.0.1:{port_a}"\n'
                      '[[routes]]\nprefix = "/big"\nface = "a"\n')
    sock_a = procs.forwarder("a", udp=port_a, config=conf_a)
    sock_b = procs.forwarder("b", udp=port_b, config=conf_b)
    producer = _run(procs, "producer", SEGMENT_PRODUCER, sock_a, wait_ready=True)
    consumer = _run(procs, "consumer", SEGMENT_CONSUMER, sock_b)
    assert f"FETCHED {1 << 20} OK" in _output(consumer, timeout=60), producer.tail()


PATIENT_CONSUMER = textwrap.dedent('''
    import asyncio, sys
    from ndn.appv2 import NDNApp, pass_all
    from ndn.types import InterestNack, InterestTimeout
    app = NDNApp()

    async def main():
        try:
            for _ in range(100):            # asked again until answered (~20 s at most)
                try:
                    _, content, _ = await app.express(sys.argv[1], validator=pass_all,
                                                      lifetime=500, must_be_fresh=True)
                    print("DATA", bytes(content).decode(), flush=True)
                    return
                except (InterestNack, InterestTimeout):
                    await asyncio.sleep(0.2)
        finally:
            app.shutdown()
    app.run_forever(after_start=main())
''')


def test_a_tcp_face_of_the_config_waits_for_its_peer_and_comes_back_after_its_restart(procs):
    """Forwarder a's [[faces]] entry points at b's TCP port before b runs: a starts anyway,
    connects once b is up (its route with it), and again after b restarts."""
    from ndnps.lab.process import free_port
    port_b = free_port()
    conf_a = procs.workdir / "a.toml"
    conf_a.write_text(f'[[faces]]\nname = "b"\nuri = "tcp4://127.0.0.1:{port_b}"\n'
                      '[[routes]]\nprefix = "/hello"\nface = "b"\n')
    sock_a = procs.forwarder("a", config=conf_a)               # b is not up: a starts
    for attempt in (1, 2):
        sock_b = procs.forwarder(f"b{attempt}", tcp=port_b)
        producer = _run(procs, f"producer{attempt}", PRODUCER, sock_b, "/hello",
                        wait_ready=True)
        consumer = _run(procs, f"consumer{attempt}", PATIENT_CONSUMER, sock_a, "/hello/world")
        assert "DATA hello from /hello" in _output(consumer, timeout=30)
        producer.stop()
        procs.by_name[f"b{attempt}"].stop()                     # b goes away; a reconnects
    log_a = procs.by_name["a"].tail(80)
    assert "not up" in log_a and "down; reconnecting" in log_a, log_a
