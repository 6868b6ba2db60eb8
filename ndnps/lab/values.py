"""How a scenario's values are checked, and the constants more than one table needs: below the
spec and every feature module, so each of them reads a number the same way and names the key
it came from."""
from __future__ import annotations

import math
from typing import Any

from ndnps.forwarder.faces.udp import MIN_MTU
from ndnps.ndn.tlv import MAX_PACKET_SIZE


class ScenarioError(ValueError):
    """A bad scenario; the message starts with the offending key."""


# the bottleneck topology's two hosts (network namespaces), each with its forwarder
BOTTLENECK_PS_HOST, BOTTLENECK_WORKERS_HOST = "ps-host", "workers-host"
ETHERNET_HEADER = 14          # bytes a frame adds to the MTU on the veth (what tbf counts)
IP_UDP_HEADERS = 20 + 8       # IPv4 and UDP: a datagram's payload is the MTU less these
# links.mtu: a UDP face's datagrams must hold the forwarder's smallest (576); jumbo frames
MTU_MIN, MTU_MAX = MIN_MTU + IP_UDP_HEADERS, 9000


def udp_face_mtu(link_mtu: int) -> int:
    """The longest datagram a forwarder's UDP face over a link of `link_mtu` sends: the MTU
    less the IPv4 and UDP headers, at most the longest NDN packet (as NFD caps its UDP faces'
    MTU), so that no datagram is split by IP."""
    return min(link_mtu - IP_UDP_HEADERS, MAX_PACKET_SIZE)


def number(value: Any, key: str, low: float = 0.0, high: float | None = None,
           integer: bool = False) -> Any:
    """`value` as a number within [low, high] (an int when `integer`), else ScenarioError
    naming `key`."""
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if not ok or isinstance(value, bool):
        raise ScenarioError(f"{key}: expected {'an integer' if integer else 'a number'}, "
                            f"got {value!r}")
    if not math.isfinite(value):        # TOML's nan and inf would slip past every bound
        raise ScenarioError(f"{key}: expected a finite number, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"within [{low}, {high}]"
        raise ScenarioError(f"{key}: must be {bound}, got {value!r}")
    return value if integer else float(value)


def known_keys(table: Any, where: str, keys: set[str]) -> dict:
    """`table` as a dict whose every key is one of `keys`, else ScenarioError naming it."""
    if not isinstance(table, dict):
        raise ScenarioError(f"{where}: expected a table")
    for key in table:
        if key not in keys:
            raise ScenarioError(f"{where}.{key}: unknown key (known: {', '.join(sorted(keys))})")
    return table


def fmt(value: Any, spec: str) -> str:
    """A figure as the progress and the final table show it: "-" when there is none."""
    return "-" if value is None else format(value, spec)
