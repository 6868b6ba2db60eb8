"""Batched datagram I/O on a non-blocking UDP socket: every datagram the socket holds read in
one call, what a loop turn queued sent in one — `recvmmsg(2)`/`sendmmsg(2)` through the small C
module `_mmsg` (built at install beside the compiled core), or one `recvfrom`/`sendto` per
datagram where it is not built (the same results, more system calls).

Addresses to send to are opaque: `sockaddr(host, port)` makes one once per peer (the packed
`struct sockaddr` for `_mmsg`, the `(host, port)` tuple otherwise); received datagrams come with
`(host, port)` tuples either way. No asyncio here: the caller waits for readability.
"""
from __future__ import annotations

import socket
from typing import Any, Final

try:
    from . import _mmsg                     # type: ignore[attr-defined]
except ImportError:                          # not built: one system call per datagram
    _mmsg = None

BATCHED: Final = _mmsg is not None
BATCH: Final = 64                  # datagrams per receive call (the kernel's queue is far more)


def sockaddr(host: str, port: int) -> Any:
    """The address `send_many` takes for (host, port), made once per peer."""
    if _mmsg is not None:
        return _mmsg.sockaddr(host, port)
    return (host, port)


def recv_many(sock: socket.socket, bufsize: int, limit: int = BATCH) -> list[tuple[bytes, Any]]:
    """Up to `limit` datagrams the socket holds now, each as (data, (host, port)); [] when none.
    A datagram longer than `bufsize` comes back longer than `bufsize` (whatever its content),
    for the caller to drop as oversize."""
    if _mmsg is not None:
        return _mmsg.recv_many(sock.fileno(), limit, bufsize)
    out: list[tuple[bytes, Any]] = []
    for _ in range(limit):
        try:
            out.append(sock.recvfrom(bufsize + 1))
        except (BlockingIOError, InterruptedError):
            break
    return out


def send_many(sock: socket.socket, frames: list[bytes], addrs: list[Any]) -> int:
    """Send frames[i] to addrs[i] in order until the kernel pushes back; how many it took.
    OSError (not EAGAIN) for the first datagram, if the very first is refused."""
    if _mmsg is not None:
        return _mmsg.send_many(sock.fileno(), frames, addrs)
    for i, (frame, addr) in enumerate(zip(frames, addrs)):
        try:
            sock.sendto(frame, addr)
        except (BlockingIOError, InterruptedError):
            return i
        except OSError:
            if i == 0:
                raise
            return i
    return len(frames)
