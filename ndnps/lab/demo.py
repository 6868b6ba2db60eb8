"""python -m ndnps.demo: start a forwarder, a python-ndn producer and a consumer as separate
processes, and show one Interest/Data exchange through the forwarder."""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

from .process import ManagedProcess, ProcessFailed, start_forwarder, wait_until

# Minimal python-ndn apps, run as `python -c SCRIPT ARG` (the integration tests use them too).
PRODUCER = textwrap.dedent('''
    import sys
    from ndn.appv2 import NDNApp
    from ndn.security import DigestSha256Signer
    app = NDNApp()
    signer = DigestSha256Signer()

    @app.route(sys.argv[1])
    def on_interest(name, param, reply, context):
        reply(app.make_data(name, b"hello from " + sys.argv[1].encode(), signer=signer,
                            freshness_period=1000))

    async def ready():
        print("READY", flush=True)
    app.run_forever(after_start=ready())
''')

CONSUMER = textwrap.dedent('''
    import sys
    from ndn.appv2 import NDNApp, pass_all
    from ndn.encoding import Name
    from ndn.types import InterestNack, InterestTimeout
    app = NDNApp()

    async def main():
        try:
            name, content, _ = await app.express(Name.from_str(sys.argv[1]), validator=pass_all,
                                                 lifetime=3000, can_be_prefix=False)
            print("DATA", Name.to_str(name), bytes(content).decode(), flush=True)
        except InterestNack as e:
            print("NACK", e.reason, flush=True)
        except InterestTimeout:
            print("TIMEOUT", flush=True)
        finally:
            app.shutdown()
    app.run_forever(after_start=main())
''')


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="python -m ndnps.demo", description=__doc__,
        epilog="It takes a few seconds, in a temporary directory it removes; exit 0 when the "
               "consumer got the Data, 1 (with the failing process's log tail) otherwise.")


def main(argv: list[str] | None = None) -> int:
    build_parser().parse_args(argv)         # --help (no flags besides)
    workdir = Path(tempfile.mkdtemp(prefix="ndnps-demo-"))
    procs: list[ManagedProcess] = []
    try:
        fwd, sock = start_forwarder("forwarder", workdir)
        procs.append(fwd)
        print(f"forwarder listening on unix://{sock}")
        env = {"NDN_CLIENT_TRANSPORT": f"unix://{sock}"}
        producer = ManagedProcess("producer", [sys.executable, "-c", PRODUCER, "/demo"],
                                  workdir / "producer.log", env)
        procs.append(producer)
        wait_until(lambda: "READY" in producer.tail(), 15, producer, "registered")
        print("producer registered /demo")
        consumer = ManagedProcess("consumer", [sys.executable, "-c", CONSUMER, "/demo/hello"],
                                  workdir / "consumer.log", env)
        procs.append(consumer)
        if consumer.wait(20) != 0:
            raise consumer.fail("failed")
        print("consumer got:", consumer.tail(1))
        from ndnps.forwarder.status import fetch_status, print_status
        print_status(fetch_status(f"unix://{sock}"))
        return 0
    except ProcessFailed as e:
        print(f"demo failed: {e}", file=sys.stderr)
        return 1
    finally:
        for proc in reversed(procs):
            proc.stop()
        shutil.rmtree(workdir, ignore_errors=True)

