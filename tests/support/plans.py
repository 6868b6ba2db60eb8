"""Following a scenario plan's routes (ndnps.lab.topology.Plan) in tests."""
from __future__ import annotations


def walk(plan, start: str, prefix: str, goal: str) -> list[str]:
    """Follow the routes for `prefix` from forwarder `start` to `goal`: the forwarders on the
    way (one route per hop, no loop)."""
    at, seen = start, [start]
    while at != goal:
        hops = [face for p, face in plan.forwarders[at].routes if p == prefix]
        assert len(hops) == 1, f"{at} has {len(hops)} routes for {prefix}"
        at = hops[0]
        assert at not in seen, f"a loop: {seen + [at]}"
        seen.append(at)
    return seen
