"""Running an app process: logging, the event loop (uvloop when present), the connection to the
forwarder, signals, and the exit code.

``launch(make_app, main)`` connects ``make_app()``'s face, runs the face's receive loop and
``main(app)`` side by side, and returns main's exit code.  SIGINT/SIGTERM cancel main (which
cleans up: a worker still sends its ``*remove*``).  A lost forwarder connection (the forwarder
was killed or restarted) is reconnected with bounded exponential backoff (0.1 s doubling to 2 s)
while main goes on — meanwhile its Interests are lost and retried as on a lossy link — and,
once back, every prefix is registered again and the app told (``App.on_reconnect``); after
``--reconnect-timeout`` seconds without a forwarder the run ends with exit code 1.

Each program's ``prepare(argv)`` does all that comes before the connection (flags,
configuration, metrics) and returns a `Prepared` (or the exit code of a bad configuration);
its ``main`` serves it (`serve_prepared`). A simulator runs the same `Prepared.role` on an App
it connected itself, in virtual time (ndnps.sim), without `serve`.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any, Callable, Coroutine, NamedTuple

from ndnps.lab.exitcodes import EXIT_ERROR, EXIT_JOB_FAILED, EXIT_OK, EXIT_SIGNAL, EXIT_USAGE
from ndnps.client.app import App
from ndnps.lab.metrics import MetricsWriter

__all__ = ["EXIT_ERROR", "EXIT_JOB_FAILED", "EXIT_OK", "EXIT_SIGNAL", "EXIT_USAGE", "launch",
           "serve", "serve_args", "serve_prepared", "Prepared", "app_parser", "begin",
           "setup_logging", "limit_blas_threads"]

log = logging.getLogger("launch")


def app_parser(prog: str, description: str, exits: str, metrics: str) -> argparse.ArgumentParser:
    """The flags both apps share: --metrics, --transport, --log-level."""
    p = argparse.ArgumentParser(
        prog=prog, description=description,
        epilog="The forwarder is reached as python-ndn does: NDN_CLIENT_TRANSPORT "
               f"(e.g. unix:///tmp/fwd.sock) or --transport. Exit codes: {exits}.")
    p.add_argument("--metrics", metavar="FILE", help=f"append JSON lines, {metrics}")
    p.add_argument("--transport", metavar="URI", help="forwarder, e.g. unix:///run/nfd/nfd.sock")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--reconnect-timeout", type=float, default=30.0, metavar="S",
                   help="when the forwarder connection is lost, try to reconnect (backoff "
                        "0.1 s doubling to 2 s) for this long, then exit 1 (0: exit at once; "
                        "default: 30)")
    p.add_argument("--lp-reliability", action="store_true",
                   help="ask the forwarder for NDNLPv2 link reliability on our face "
                        "(faces/update LpReliabilityEnabled): losses on this hop are repaired "
                        "one link round trip after them")
    p.add_argument("--start-after", type=float, default=0.0, metavar="S",
                   help="connect, then wait this long before starting (a job that starts "
                        "later than the others in a scenario)")
    p.add_argument("--link-repair", action="store_true",
                   help="the links further on have NDNLPv2 link reliability, our own face "
                        "not (an app on a forwarder's local socket): wait for the links' "
                        "repair before taking an Interest as lost, instead of racing it")
    return p


def begin(args: argparse.Namespace, who: str) -> None:
    """What a training app does first: log at --log-level as `who`, with one BLAS thread."""
    setup_logging(args.log_level, who)
    limit_blas_threads()


def setup_logging(level: str, who: str) -> None:
    logging.basicConfig(level=level, format=f"%(asctime)s %(levelname)s {who} %(name)s: %(message)s")


def limit_blas_threads(n: int = 1) -> None:
    """One BLAS thread: these models are small, and an app is one of several processes on the
    host; OpenBLAS's thread pool made the PS's test-set evaluation ~8x slower (0.66 ms vs
    0.09 ms idle, worse under load)."""
    try:
        from threadpoolctl import threadpool_limits      # comes with scikit-learn
    except ImportError:                                  # pragma: no cover
        return
    threadpool_limits(n)


class Prepared(NamedTuple):
    """A program ready to run, before any connection: whoever runs `role` honours the
    connection flags of `args` (transport, reconnect_timeout, lp_reliability, link_repair,
    start_after) and closes `metrics` at the end."""
    args: argparse.Namespace
    metrics: MetricsWriter
    role: Callable[[App], Coroutine[Any, Any, int]]


def serve_prepared(p: Prepared | int) -> int:
    """Run a prepared program as a process (`serve_args` with its flags); an exit code (a
    bad configuration) is returned as it is."""
    return p if isinstance(p, int) else serve_args(p.args, p.metrics, p.role)


def serve_args(args: argparse.Namespace, metrics,
               role: Callable[[App], Coroutine[Any, Any, int]]) -> int:
    """`serve` with app_parser's flags: the transport, reconnection, link reliability and
    start delay as the command line set them."""
    return serve(args.transport, metrics, role, args.reconnect_timeout, args.lp_reliability,
                 args.link_repair, args.start_after)


def serve(transport: str | None, metrics, role: Callable[[App], Coroutine[Any, Any, int]],
          reconnect_timeout: float = 30.0, lp_reliability: bool = False,
          link_repair: bool = False, start_after: float = 0.0) -> int:
    """Run `role(app)` on an App connected to `transport` (after `start_after` s); close
    `metrics` whatever happens."""
    async def delayed(app: App) -> int:
        await asyncio.sleep(start_after)
        return await role(app)
    try:
        return launch(lambda: App(transport, lp_reliability=lp_reliability,
                                  link_repair=link_repair),
                      delayed if start_after > 0 else role, reconnect_timeout)
    finally:
        metrics.close()


def launch(make_app: Callable[[], App], main: Callable[[App], Coroutine[Any, Any, int]],
           reconnect_timeout: float = 30.0) -> int:
    runner: Callable[[Coroutine[Any, Any, int]], int]
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:           # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    return runner(_serve(make_app, main, reconnect_timeout))


async def reconnect(app: App, timeout: float) -> bool:
    """Open the face again, backing off 0.1 s doubling to 2 s, for `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = 0.1
    while loop.time() < deadline:
        await asyncio.sleep(min(delay, max(0.0, deadline - loop.time())))
        delay = min(2 * delay, 2.0)
        try:
            await app.reconnect()
            return True
        except (OSError, ConnectionError):
            continue
    return False


async def _serve(make_app: Callable[[], App], main: Callable[[App], Coroutine[Any, Any, int]],
                 reconnect_timeout: float = 30.0) -> int:
    app = make_app()
    reregister = None               # the task registering prefixes again after a reconnect
    try:
        await app.face.open()
    except (OSError, ConnectionError) as e:
        log.error("cannot connect to the forwarder at %s: %s", app.transport, e)
        return EXIT_ERROR
    face_task = asyncio.create_task(app.face.run())
    if app.lp_reliability:
        await app.enable_reliability()
    main_task = asyncio.create_task(main(app))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main_task.cancel)
    try:
        while True:
            await asyncio.wait({face_task, main_task}, return_when=asyncio.FIRST_COMPLETED)
            if main_task.done():
                break
            app.face.close()
            log.warning("lost the connection to the forwarder at %s: reconnecting (for %.0f s "
                        "at most)", app.transport, reconnect_timeout)
            back = asyncio.create_task(reconnect(app, reconnect_timeout))
            await asyncio.wait({back, main_task}, return_when=asyncio.FIRST_COMPLETED)
            if main_task.done():
                back.cancel()
                break
            if not back.result():
                log.error("lost the connection to the forwarder at %s: not back within %.0f s",
                          app.transport, reconnect_timeout)
                main_task.cancel()
                await asyncio.gather(main_task, return_exceptions=True)
                return EXIT_ERROR
            log.info("reconnected to the forwarder at %s", app.transport)
            face_task = asyncio.create_task(app.face.run())
            reregister = asyncio.create_task(app.after_reconnect())    # noqa: F841 (kept alive)
        if main_task.cancelled():
            return EXIT_SIGNAL
        exc = main_task.exception()
        if exc is not None:
            log.error("failed", exc_info=exc)
            return EXIT_ERROR
        return main_task.result()
    finally:
        try:
            await asyncio.wait_for(app.drain(), 1.0)     # let the last packets out
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
        app.shutdown()
        face_task.cancel()
        await asyncio.gather(face_task, return_exceptions=True)
