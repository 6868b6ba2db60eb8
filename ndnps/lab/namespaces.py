"""A --netns run's network: a namespace per host, joined by veths, with the kernel's netem or
tbf on them where it can (the forwarders' faces emulate what it cannot); the bottleneck's tbf
and its counters (ndnps.lab.bottleneck). The runner's part of it, as a mixin of the Runner."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import bottleneck, minindn, topology
from .exitcodes import RunFailed
from .features import active
from .netns import Netns, NetnsUnavailable, check_available, remove_stale

if TYPE_CHECKING:
    from .config import Scenario


def check_netns(sc: "Scenario") -> None:
    """NetnsUnavailable (or ScenarioError), naming the cause, unless this host can make the
    scenario's namespaces (and for the bottleneck, its tbf qdiscs)."""
    for feature in active(sc):
        feature.check_host(sc)
    if sc.topology == "bottleneck" or sc.links.rate_mbps or minindn.limited(sc):
        check_available('topology.kind = "bottleneck"' if sc.topology == "bottleneck"
                        else "links.rate_mbps with --netns", tbf=True)
    else:
        check_available()


class NamespaceSetup:
    """The Runner's namespaces: made by `plan_hosts`, closed at its shutdown."""
    sc: "Scenario"
    netns: Netns | None
    notes: list[str]
    link_stats: dict[str, dict] | None

    def reap_if_killed(self) -> None: ...

    def plan_hosts(self) -> topology.Plan:
        """The netns plan, its namespaces and veths made, the links' conditions set."""
        check_netns(self.sc)
        plan = topology.plan_hosts(self.sc)
        for ns in remove_stale():
            self.notes.append(f"removed network namespace {ns}, left by a run that was killed")
        self.reap_if_killed()
        self.netns = Netns.owned()
        for name in plan.forwarders:
            self.netns.add_host(name)
        for a, b in plan.host_links:            # every veth at links.mtu
            self.netns.link(a, b, self.sc.links.mtu)
        if self.sc.topology == "minindn":      # each link its own conditions: the file's
            self.notes += minindn.join(plan, self.sc, self.netns)
            return plan
        link = self.sc.links.as_table()
        kernel = False
        if self.sc.topology == "bottleneck":
            bottleneck.limit(self.netns, self.sc)
            if link:
                self.notes.append("[links] conditions emulated in the forwarders' faces on the "
                                  "bottleneck's veth, on top of its tbf")
        else:
            kernel = self._netem()
            if not kernel and self._limit_links():
                link.pop("rate_mbps")           # the kernel limits it: not the faces too
            if link and not kernel and self.sc.netem:
                self.notes.append("kernel netem unavailable: link conditions emulated in the "
                                  "forwarders' faces")
        addrs = [(veth.addr_a, veth.addr_b) for veth in self.netns.links]
        topology.assign_addresses(plan, addrs, {} if kernel else link, self.sc.links.reliability)
        topology.apply_link_overrides(plan, self.sc)
        return plan

    def _netem(self) -> bool:
        """[links] loss and delay by the kernel's netem on both ends of every veth; whether
        the kernel took them (else the forwarders emulate them)."""
        assert self.netns is not None
        links = self.sc.links
        kernel = False
        if self.sc.netem and (links.loss or links.delay_ms):
            for veth in self.netns.links:
                kernel = self.netns.netem(veth.a, veth.dev_a, links.loss, links.delay_ms) \
                    and self.netns.netem(veth.b, veth.dev_b, links.loss, links.delay_ms)
        return kernel

    def _limit_links(self) -> bool:
        """[links] rate_mbps by the kernel's tbf on both ends of every veth ([links]
        queue_bytes, burst and by default queue as [bottleneck]'s); False when there is no
        rate to limit."""
        assert self.netns is not None
        rate = self.sc.links.rate_mbps
        if not rate:
            return False
        b = self.sc.bottleneck
        queue = int(self.sc.links.queue_bytes) or b.queue_bytes
        for veth in self.netns.links:
            for host, dev in ((veth.a, veth.dev_a), (veth.b, veth.dev_b)):
                try:
                    self.netns.tbf(host, dev, rate, b.burst_bytes, queue)
                except RuntimeError as e:
                    raise NetnsUnavailable(f"cannot limit the link at {host}: {e}") from None
        self.notes.append(f"links limited to {rate:g} Mbit/s by tbf on every veth")
        return True

    def read_link_stats(self) -> None:
        """The bottleneck's tbf counters, per direction (sender->receiver host), once, while
        its namespaces exist: at the end of the run, or when it fails."""
        if self.link_stats is not None or self.netns is None or not self.netns.hosts \
                or self.sc.topology != "bottleneck":
            return
        self.link_stats = bottleneck.qdisc_stats(self.netns, self.notes)

    def address_of(self, host: str) -> str:
        """`host`'s address on its (first) veth."""
        assert self.netns is not None
        for veth in self.netns.links:
            if host in (veth.a, veth.b):
                return veth.addr_a if host == veth.a else veth.addr_b
        raise RunFailed(f"host {host} has no link")
