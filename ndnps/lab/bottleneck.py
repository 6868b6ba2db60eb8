"""The bottleneck topology's own figures (docs/congestion.md): its note, the tbf qdisc on both
ends of its veth and their counters, summary.json's `bottleneck` and its rows in the final
table."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .netns import NetnsUnavailable
from .values import fmt

if TYPE_CHECKING:
    from .config import Scenario
    from .netns import Netns


def bottleneck_note(sc: "Scenario") -> str:
    """What a bottleneck run measures: its accuracy, after a training cut short so that a run
    takes minutes, reads as a broken one otherwise."""
    t = sc.training
    versions = f"{t.sgd.max_versions} versions" if t.sgd.max_versions else f"{t.sgd.epochs} epochs"
    what = "each job's share of the wire and iteration time, summary.json `sharing`" \
        if sc.jobs else "iteration time against the wire's limit, summary.json `bottleneck`"
    return (f"{sc.name} measures the link ({what}), not the model: {versions} of training on "
            f"{t.model.dataset} data end far from converged, so the accuracy is no verdict on "
            "the run")


def limit(netns: "Netns", sc: "Scenario") -> None:
    """tbf at [bottleneck]'s rate, burst and queue on both ends of the bottleneck's veth
    (each end limits what leaves through it: one direction each); deleted with the
    namespaces."""
    b = sc.bottleneck
    for veth in netns.links:
        for host, dev in ((veth.a, veth.dev_a), (veth.b, veth.dev_b)):
            try:
                netns.tbf(host, dev, b.rate_mbps, b.burst_bytes, b.queue_bytes)
            except RuntimeError as e:
                raise NetnsUnavailable(f"cannot limit the bottleneck at {host}: {e}") from None


def qdisc_stats(netns: "Netns", notes: list[str]) -> dict[str, dict]:
    """The bottleneck's tbf counters, per direction (sender->receiver host); what cannot be
    read goes into `notes`."""
    stats = {}
    for veth in netns.links:
        for host, dev, peer in ((veth.a, veth.dev_a, veth.b), (veth.b, veth.dev_b, veth.a)):
            try:
                stats[f"{host}->{peer}"] = netns.qdisc_stats(host, dev)
            except (RuntimeError, ValueError) as e:
                notes.append(f"qdisc counters of {host}->{peer} unavailable: {e}")
    return stats


def wire_limits(model_bytes: int, workers: int, rate_bytes_per_s: float) -> dict[str, float]:
    """The least seconds a sync iteration can take on the bottleneck when each system moves
    only the model's bytes (M) at the link's rate (R), pushes and gradients one after the
    other: ndnps pushes the parameters once (multicast along the persistent PIT) and collects
    N gradients, (N+1)·M/R; the TCP PS sends N copies and receives N gradients, 2N·M/R."""
    return {"ndnps": (workers + 1) * model_bytes / rate_bytes_per_s,
            "tcp": 2 * workers * model_bytes / rate_bytes_per_s}


def _drop_ratio(drops: int, sent: int) -> float | None:
    return drops / sent if sent else None


def bottleneck_summary(sc: Any, qdisc: dict[str, dict[str, Any]] | None, model_bytes: int | None,
                       iteration: float | None) -> dict[str, Any]:
    """summary.json's `bottleneck`: the link as configured, each direction's tbf counters
    (`qdisc`, by "sender->receiver" host; None if they could not be read) with drops over
    packets sent (the benchmark's target: at most 1 %), and the wire limits of both systems
    with the measured median iteration over each."""
    b = sc.bottleneck
    out: dict[str, Any] = {"rate_mbps": b.rate_mbps, "queue_bytes": b.queue_bytes,
                           "burst_bytes": b.burst_bytes, "mtu": b.mtu, "qdisc": None}
    if qdisc is not None:
        out["qdisc"] = {d: {**c, "drops_over_sent": _drop_ratio(c["drops"], c["sent_packets"])}
                        for d, c in qdisc.items()}
        sent = sum(int(c["sent_packets"]) for c in qdisc.values())
        drops = sum(int(c["drops"]) for c in qdisc.values())
        out.update(qdisc_sent_packets=sent, qdisc_drops=drops,
                   qdisc_drops_over_sent=_drop_ratio(drops, sent))
    if model_bytes:
        # the first job's (one job: the run's); several jobs are compared in `sharing`
        limits = wire_limits(model_bytes, len(sc.training.who.workers), b.rate_bytes_per_s)
        out["wire_limit_seconds"] = limits
        out["iteration_over_wire_limit"] = {
            k: (iteration / v if iteration is not None else None) for k, v in limits.items()}
    return out


def bottleneck_rows(b: dict | None) -> list[tuple[str, object]]:
    """The final table's rows for the bottleneck: iteration over both wire limits, drops."""
    if not b:
        return []
    over = b.get("iteration_over_wire_limit") or {}
    return [(f"iteration / wire limit {k} ({fmt(b['wire_limit_seconds'][k], '.3f')} s)",
             fmt(v, ".3f")) for k, v in over.items()] + drop_rows(b)


def drop_rows(b: dict | None) -> list[tuple[str, object]]:
    """The bottleneck's qdisc drops over the packets it sent, both directions."""
    if not b or b.get("qdisc") is None:
        return []
    return [("qdisc drops / packets sent", f"{b['qdisc_drops']} / {b['qdisc_sent_packets']} "
             f"({fmt(b['qdisc_drops_over_sent'], '.2%')})")]
