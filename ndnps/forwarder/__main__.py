"""python -m forwarder [flags]                     run a forwarder
python -m forwarder status [--unix PATH] [--json]  print a running forwarder's state"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any, Callable, Coroutine

from .config import DEFAULT_PORT, DEFAULT_UNIX, ConfigError, load_config


def _default_transport() -> str:
    return os.environ.get("NDN_CLIENT_TRANSPORT", f"unix://{DEFAULT_UNIX}")


def run_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m forwarder",
                                description="NDN forwarder with persistent PIT entries (ndnps).")
    p.add_argument("--unix", metavar="PATH",
                   help=f"unix socket to listen on ('' = off; default {DEFAULT_UNIX})")
    p.add_argument("--tcp", type=int, metavar="PORT",
                   help=f"TCP port (0 = off; default {DEFAULT_PORT})")
    p.add_argument("--udp", type=int, metavar="PORT",
                   help=f"UDP port (0 = off; default {DEFAULT_PORT})")
    p.add_argument("--host", help="address the TCP/UDP listeners bind (default 0.0.0.0)")
    p.add_argument("--config", metavar="FILE",
                   help="TOML configuration (see ndnps/forwarder/config.py)")
    p.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(args.config)
    except ConfigError as e:
        print(f"forwarder: bad configuration: {e}", file=sys.stderr)
        return 2
    for key in ("unix", "tcp", "udp", "host"):
        value = getattr(args, key)
        if value is not None:
            setattr(cfg, key, value)
    runner: Callable[[Coroutine[Any, Any, int]], int]
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:           # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    try:
        return runner(_serve(cfg))
    except (OSError, RuntimeError, ValueError) as e:
        print(f"forwarder: {e}", file=sys.stderr)
        return 1


async def _serve(cfg) -> int:
    from .daemon import ForwarderDaemon
    daemon = ForwarderDaemon(cfg)
    await daemon.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await daemon.stop()
    logging.getLogger("forwarder").info("forwarder stopped")
    return 0


def _transport(value: str) -> str:
    from .status import transport_address
    try:
        transport_address(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def _unix_transport(path: str) -> str:
    if not path:
        raise argparse.ArgumentTypeError("an empty socket path")
    # absolute: unix://rel/x.sock would read "rel" as a host
    return _transport(f"unix://{os.path.abspath(path)}")


def status_main(argv: list[str]) -> int:
    from ndn.encoding import DecodeError

    from .status import fetch_status, print_status
    p = argparse.ArgumentParser(prog="python -m forwarder status",
                                description="Print a running forwarder's faces, FIB, "
                                            "persistent PIT and counters.")
    where = p.add_mutually_exclusive_group()
    # --unix as the forwarder spells its socket, so its command line's flag can be copied here
    where.add_argument("--unix", metavar="PATH", dest="transport", type=_unix_transport,
                       help="the forwarder's unix socket, as given to its --unix (default: "
                            f"$NDN_CLIENT_TRANSPORT or {DEFAULT_UNIX})")
    where.add_argument("--transport", metavar="URI", dest="transport", type=_transport,
                       help="unix:///path or tcp://host:port instead")
    p.add_argument("--json", action="store_true", help="print the raw JSON document")
    args = p.parse_args(argv)       # a bad --unix/--transport exits 2, as every usage error
    # the default after parsing: argparse would pass a string default through --unix's type
    args.transport = args.transport or _default_transport()
    try:
        status = fetch_status(args.transport)
    except OSError as e:            # no socket file, refused, timed out, hung up
        print(f"forwarder status: cannot reach a forwarder at {args.transport}: "
              f"{e.strerror or str(e) or type(e).__name__}", file=sys.stderr)
        return 1
    except (ValueError, DecodeError) as e:     # whoever answered is not an ndnps forwarder
        print(f"forwarder status: {args.transport} answered with no ndnps status: "
              f"{str(e) or type(e).__name__}", file=sys.stderr)
        return 1
    try:
        if args.json:
            print(json.dumps(status, indent=2))
        else:
            print_status(status)
        sys.stdout.flush()          # a reader gone (`| head`) shows here, not at exit
    except BrokenPipeError:
        # Python's docs (signal module, "Note on SIGPIPE"): point stdout at devnull so the
        # flush at exit does not fail again, and stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["status"]:
        return status_main(argv[1:])
    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main())
