"""Hosts in Linux network namespaces joined by veth pairs, as Mini-NDN does with Mininet.

Every namespace, link and qdisc made here is removed by `close()` — also on an exception,
and the scenario runner calls it from its Ctrl-C/SIGTERM path. A runner killed outright
(SIGKILL) cannot: its namespaces are named `ndnps-<owner tag>-<host>` (`Netns.owned`), and
`remove_stale()`, which every netns run calls first, deletes those whose owner no longer
runs. Needs root and iproute2.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Iterator

from .process import owner_alive, owner_tag

PREFIX = "ndnps-"
_OWNED = re.compile(rf"^{PREFIX}(\d+\.\d+)-")


class NetnsUnavailable(RuntimeError):
    """Not root, or `ip netns` is missing: the caller skips or fails with this message."""


def check_available(requirement: str = "--netns", tbf: bool = False) -> None:
    """Raise NetnsUnavailable, naming the cause, unless namespaces (and with `tbf`, the
    kernel's tbf qdisc in one) can be made here; `requirement` is what needs them."""
    if os.geteuid() != 0:
        if requirement == "--netns":
            raise NetnsUnavailable("network namespaces need root (run as root or drop --netns)")
        raise NetnsUnavailable(f"{requirement} runs in network namespaces, which need root "
                               "(run as root)")
    for tool in ("ip", "tc") if tbf else ("ip",):
        if shutil.which(tool) is None:
            raise NetnsUnavailable(f"`{tool}` (iproute2) is not installed; {requirement} "
                                   "needs it")
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise NetnsUnavailable(f"`ip netns` does not work here: {probe.stderr.strip()}")
    if tbf:
        _probe_tbf(requirement)


def _probe_tbf(requirement: str) -> None:
    """Put a tbf qdisc on the loopback device of a throwaway namespace (named after this
    process, so that `remove_stale` deletes it should we be killed meanwhile)."""
    with Netns.owned() as probe:
        try:
            probe.add_host("tbf-probe")
            probe.tbf("tbf-probe", "lo", rate_mbps=1.0, burst_bytes=2000, queue_bytes=3000)
        except RuntimeError as e:
            raise NetnsUnavailable(f"the kernel's tbf qdisc is unavailable here ({e}); "
                                   f"{requirement} limits its link with it") from None


def _tc(ns: str, *args: str) -> str:
    proc = subprocess.run(["ip", "netns", "exec", ns, "tc", *args], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tc {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


# what `tc -s -j qdisc show` says of a qdisc -> our names (summary.json)
QDISC_COUNTERS = {"bytes": "sent_bytes", "packets": "sent_packets", "drops": "drops",
                  "overlimits": "overlimits", "requeues": "requeues",
                  "backlog": "backlog_bytes", "qlen": "backlog_packets"}


def parse_qdisc_stats(text: str) -> dict[str, int | str]:
    """The root qdisc's counters from `tc -s -j qdisc show dev X` (JSON): its kind, bytes and
    packets sent, drops, overlimits, requeues and what is still queued."""
    root = next((q for q in json.loads(text or "[]") if q.get("root")), None)
    if root is None:
        raise ValueError("no root qdisc in the output of tc")
    out: dict[str, int | str] = {"kind": str(root.get("kind"))}
    out.update({ours: int(root.get(theirs, 0)) for theirs, ours in QDISC_COUNTERS.items()})
    return out


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


@dataclass
class Link:
    a: str
    b: str
    dev_a: str
    dev_b: str
    addr_a: str
    addr_b: str


@dataclass
class Netns:
    """A set of hosts (namespaces) named `<tag>-<host>` and the point-to-point links between
    them, each on its own /30 of `subnet`."""
    tag: str
    subnet: str = "10.231.0.0/16"
    hosts: dict[str, str] = field(default_factory=dict)   # host -> namespace
    links: list[Link] = field(default_factory=list)
    netem_supported: bool | None = None

    def __post_init__(self) -> None:
        self._subnets: Iterator[ipaddress.IPv4Network | ipaddress.IPv6Network] = \
            ipaddress.ip_network(self.subnet).subnets(new_prefix=30)

    @classmethod
    def owned(cls, **kw) -> "Netns":
        """Namespaces named after this process, so a later run can prove them its own."""
        return cls(tag=f"{PREFIX}{owner_tag()}", **kw)

    def add_host(self, host: str) -> str:
        ns = f"{self.tag}-{host}"
        _ip("netns", "add", ns)
        self.hosts[host] = ns
        _ip("-n", ns, "link", "set", "lo", "up")
        return ns

    def link(self, a: str, b: str, mtu: int | None = None) -> Link:
        net = next(self._subnets)
        addr_a, addr_b = (str(h) for h in list(net.hosts())[:2])
        # made in the root namespace, then moved: named after this process (15 bytes at
        # most), so that two runs at once do not collide there
        n = len(self.links)
        dev_a, dev_b = (f"nd{os.getpid() % 10**6}x{n}{end}" for end in "ab")
        _ip("link", "add", dev_a, "type", "veth", "peer", "name", dev_b)
        for dev, host, addr in ((dev_a, a, addr_a), (dev_b, b, addr_b)):
            ns = self.hosts[host]
            _ip("link", "set", dev, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            if mtu is not None:
                _ip("-n", ns, "link", "set", dev, "mtu", str(mtu))
            _ip("-n", ns, "link", "set", dev, "up")
        link = Link(a, b, dev_a, dev_b, addr_a, addr_b)
        self.links.append(link)
        return link

    def netem(self, host: str, dev: str, loss: float = 0.0, delay_ms: float = 0.0) -> bool:
        """Kernel netem on one veth end; False when the kernel has no netem qdisc."""
        if self.netem_supported is False:
            return False
        args = ["tc", "qdisc", "add", "dev", dev, "root", "netem"]
        if loss:
            args += ["loss", f"{loss * 100:.3f}%"]
        if delay_ms:
            args += ["delay", f"{delay_ms}ms"]
        proc = subprocess.run(["ip", "netns", "exec", self.hosts[host], *args],
                              capture_output=True, text=True)
        self.netem_supported = proc.returncode == 0
        return self.netem_supported

    def tbf(self, host: str, dev: str, rate_mbps: float, burst_bytes: int,
            queue_bytes: int) -> None:
        """The kernel's token bucket filter as the root qdisc of one veth end (its egress):
        at most `rate_mbps`, bursts of `burst_bytes`, `queue_bytes` queued before it drops.
        RuntimeError (with tc's message) if the kernel cannot."""
        _tc(self.hosts[host], "qdisc", "replace", "dev", dev, "root", "tbf",
            "rate", f"{round(rate_mbps * 1e6)}bit", "burst", str(burst_bytes),
            "limit", str(queue_bytes))

    def qdisc_stats(self, host: str, dev: str) -> dict[str, int | str]:
        """The counters of the root qdisc of `dev` in `host` (parse_qdisc_stats)."""
        return parse_qdisc_stats(_tc(self.hosts[host], "-s", "-j", "qdisc", "show", "dev", dev))

    def exec_argv(self, host: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.hosts[host], *argv]

    def close(self) -> None:
        """Delete every namespace made here (their veth ends and qdiscs go with them)."""
        for ns in list(self.hosts.values()):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.hosts.clear()
        self.links.clear()

    def __enter__(self) -> "Netns":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def remove_stale() -> list[str]:
    """Delete the namespaces of runs that no longer run (named by `Netns.owned`, their owner
    gone: killed outright, with no chance to clean up); returns their names."""
    stale = [ns for ns in _namespaces()
             if (m := _OWNED.match(ns)) is not None and not owner_alive(m.group(1))]
    for ns in stale:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return stale


def _namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]

