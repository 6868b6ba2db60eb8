"""The network the placement plans for: nodes (hosts run apps, switches only forward), full-duplex
links with a capacity per direction, and the one shortest path the gradients take between two
nodes. Generated (fat-tree, leaf-spine) or read from a Mini-NDN topology file.

Units: capacities in Mbit/s (Mini-NDN's `bw=`), and every rate the LP gives back in the same
unit. Paths: fewest hops; among equal-cost next hops one is chosen by a stable hash of the (source,
destination) pair, as ECMP spreads flows, so the same pair always takes the same path and
different pairs spread over the fabric.
"""
from __future__ import annotations

import re
import zlib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_BW = 100.0            # Mbit/s: a generated topology's links, and a file's without bw=


class TopologyError(ValueError):
    """A bad topology: the message names the offending node, link or key."""


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    bw: float = DEFAULT_BW            # Mbit/s, each direction
    delay_ms: float = 0.0
    loss: float = 0.0                 # percent, as Mini-NDN writes it


@dataclass
class Network:
    hosts: list[str] = field(default_factory=list)       # run apps (PS, workers)
    switches: list[str] = field(default_factory=list)    # forward only: aggregator candidates
    links: list[Link] = field(default_factory=list)
    name: str = ""

    def __post_init__(self) -> None:
        self._adj: dict[str, list[str]] = {}
        self._bw: dict[tuple[str, str], float] = {}
        self._dist: dict[str, dict[str, int]] = {}
        nodes = self.hosts + self.switches
        if len(set(nodes)) != len(nodes):
            dup = next(n for n in nodes if nodes.count(n) > 1)
            raise TopologyError(f"node {dup!r}: named twice")
        for n in nodes:
            self._adj[n] = []
        for link in self.links:
            for end in (link.a, link.b):
                if end not in self._adj:
                    raise TopologyError(f"link {link.a}:{link.b}: no node {end!r}")
            if link.a == link.b:
                raise TopologyError(f"link {link.a}:{link.b}: a node linked to itself")
            if (link.a, link.b) in self._bw:
                raise TopologyError(f"link {link.a}:{link.b}: given twice")
            if not link.bw > 0:
                raise TopologyError(f"link {link.a}:{link.b}: bw must be > 0, got {link.bw}")
            self._adj[link.a].append(link.b)
            self._adj[link.b].append(link.a)
            self._bw[(link.a, link.b)] = self._bw[(link.b, link.a)] = link.bw
        for n in self._adj:
            self._adj[n].sort()

    @property
    def nodes(self) -> list[str]:
        return self.hosts + self.switches

    def neighbours(self, node: str) -> list[str]:
        return self._adj[node]

    def capacity(self, a: str, b: str) -> float:
        """Mbit/s from a to b (one direction of a link)."""
        return self._bw[(a, b)]

    def directed_links(self) -> list[tuple[str, str]]:
        return sorted(self._bw)

    def _distances(self, dst: str) -> dict[str, int]:
        """Hops from every node to `dst` (BFS; cached per destination)."""
        if dst not in self._dist:
            dist = {dst: 0}
            todo = deque([dst])
            while todo:
                n = todo.popleft()
                for m in self._adj[n]:
                    if m not in dist:
                        dist[m] = dist[n] + 1
                        todo.append(m)
            self._dist[dst] = dist
        return self._dist[dst]

    def path(self, src: str, dst: str) -> list[tuple[str, str]]:
        """The directed links from `src` to `dst` along one shortest path ([] when equal)."""
        for end in (src, dst):
            if end not in self._adj:
                raise TopologyError(f"no node {end!r}")
        dist = self._distances(dst)
        if src not in dist:
            raise TopologyError(f"no path from {src!r} to {dst!r}")
        out, node = [], src
        spread = zlib.crc32(f"{src}>{dst}".encode())
        while node != dst:
            nexts = [m for m in self._adj[node] if dist.get(m) == dist[node] - 1]
            nxt = nexts[spread % len(nexts)]
            out.append((node, nxt))
            node = nxt
        return out

    def edge_of(self, host: str) -> str:
        """The switch a host reaches first (its ToR): its one switch neighbour, or the first
        by name when it has several."""
        switches = [m for m in self._adj[host] if m in set(self.switches)]
        if not switches:
            raise TopologyError(f"host {host!r}: no switch beside it (its edge forwarder)")
        return switches[0]


def fat_tree(k: int, bw: float = DEFAULT_BW) -> Network:
    """The k-ary fat-tree (Al-Fares et al.): k pods of k/2 edge and k/2 aggregation switches,
    (k/2)² core switches, k/2 hosts per edge switch — k = 4: 20 switches, 16 hosts. Names: core
    c1…, aggregation a<pod>-<i>, edge e<pod>-<i>, hosts h1… in pod order."""
    if k < 2 or k % 2:
        raise TopologyError(f"fat-tree:{k}: k must be even and >= 2")
    half = k // 2
    core = [f"c{i + 1}" for i in range(half * half)]
    hosts: list[str] = []
    switches, links = list(core), []
    for pod in range(1, k + 1):
        aggs = [f"a{pod}-{i + 1}" for i in range(half)]
        edges = [f"e{pod}-{i + 1}" for i in range(half)]
        switches += aggs + edges
        for i, agg in enumerate(aggs):
            links += [Link(agg, core[i * half + j], bw) for j in range(half)]
            links += [Link(edge, agg, bw) for edge in edges]
        for edge in edges:
            for _ in range(half):
                hosts.append(f"h{len(hosts) + 1}")
                links.append(Link(hosts[-1], edge, bw))
    return Network(hosts, switches, links, f"fat-tree:{k}")


def leaf_spine(spines: int, leaves: int, hosts_per_leaf: int, bw: float = DEFAULT_BW) -> Network:
    """Every leaf joined to every spine; hosts h1… under the leaves in order."""
    if min(spines, leaves, hosts_per_leaf) < 1:
        raise TopologyError(f"leaf-spine:{spines},{leaves},{hosts_per_leaf}: every count must "
                            "be >= 1")
    spine = [f"s{i + 1}" for i in range(spines)]
    leaf = [f"l{i + 1}" for i in range(leaves)]
    links = [Link(lf, sp, bw) for lf in leaf for sp in spine]
    hosts: list[str] = []
    for lf in leaf:
        for _ in range(hosts_per_leaf):
            hosts.append(f"h{len(hosts) + 1}")
            links.append(Link(hosts[-1], lf, bw))
    return Network(hosts, spine + leaf, links, f"leaf-spine:{spines},{leaves},{hosts_per_leaf}")


def bcube(n: int, k: int, bw: float = DEFAULT_BW) -> Network:
    """BCube(n, k) (Guo et al.; the `003_…` method's network): n^k hosts p0… with k-digit
    base-n addresses, k levels of n^(k−1) switches s<level>-<index> with n ports each; host p's
    level-l switch joins the hosts that differ from it only in digit l (ndnps.exchanges.
    collective.BCube numbers them alike). Every host is multi-homed: one link per level."""
    if n < 2 or k < 1:
        raise TopologyError(f"bcube:{n},{k}: need n >= 2 and k >= 1")
    hosts = [f"p{i}" for i in range(n ** k)]
    switches, links = [], []
    for level in range(k):
        for index in range(n ** (k - 1)):
            switches.append(f"s{level}-{index}")
        for i, host in enumerate(hosts):
            low, high = i % n ** level, i // n ** (level + 1)
            links.append(Link(host, f"s{level}-{high * n ** level + low}", bw))
    return Network(hosts, switches, links, f"bcube:{n},{k}")


_NUMBER = re.compile(r"^([0-9.]+)\s*([a-zA-Z]*)$")


def _value(text: str, key: str, where: str, units: dict[str, float]) -> float:
    m = _NUMBER.match(text.strip())
    if not m or m.group(2).lower() not in units:
        raise TopologyError(f"{where}: {key}={text!r} is not a number "
                            f"(units: {', '.join(u or 'none' for u in units)})")
    try:
        return float(m.group(1)) * units[m.group(2).lower()]
    except ValueError:
        raise TopologyError(f"{where}: {key}={text!r} is not a number") from None


def _sections(path: str | Path) -> dict[str, list[tuple[int, str]]]:
    """The file's `[section]`s and their lines (numbered; comments and blanks dropped)."""
    out: dict[str, list[tuple[int, str]]] = {}
    current = None
    for n, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            if current not in ("nodes", "switches", "links"):
                raise TopologyError(f"{path}:{n}: [{current}]: unknown section (known: nodes, "
                                    "switches, links)")
            out.setdefault(current, [])
        elif current is None:
            raise TopologyError(f"{path}:{n}: a line before any [section]")
        else:
            out[current].append((n, line))
    return out


def read_minindn(path: str | Path) -> Network:
    """A Mini-NDN topology file: `[nodes]` (hosts: `name: _ key=value ...`), optional
    `[switches]` (forward only), `[links]` (`a:b delay=10ms bw=100 loss=1`; bw in Mbit/s,
    default 100). Every Mini-NDN node runs a forwarder; here `[nodes]` are where apps may run
    and `[switches]` the aggregator candidates (with none, every node the training does not use
    is a candidate: `Problem.candidates`)."""
    try:
        sections = _sections(path)
    except (OSError, UnicodeDecodeError) as e:
        raise TopologyError(f"{path}: cannot read it ({e})") from None
    if "nodes" not in sections or "links" not in sections:
        raise TopologyError(f"{path}: needs [nodes] and [links]")
    hosts = [line.split(":", 1)[0].strip() for _, line in sections["nodes"]]
    switches = [line.split(":", 1)[0].strip() for _, line in sections.get("switches", [])]
    links = []
    for n, line in sections["links"]:
        ends, *params = line.split()
        a, sep, b = ends.partition(":")
        where = f"{path}:{n}: link {ends}"
        if not sep or not a or not b:
            raise TopologyError(f"{where}: expected a:b")
        kw: dict[str, float] = {}
        for p in params:
            key, _, value = p.partition("=")
            if key == "bw":
                kw["bw"] = _value(value, key, where, {"": 1.0, "mbit": 1.0, "gbit": 1000.0})
            elif key == "delay":
                kw["delay_ms"] = _value(value, key, where, {"ms": 1.0, "s": 1000.0, "us": 1e-3,
                                                           "": 1.0})
            elif key == "loss":
                kw["loss"] = _value(value, key, where, {"": 1.0})
            elif key in ("max_queue_size", "jitter"):
                continue                  # Mini-NDN's other link options: not planned for
            else:
                raise TopologyError(f"{where}: unknown option {key!r} (known: bw, delay, loss)")
        links.append(Link(a, b, **kw))
    return Network(hosts, switches, links, Path(path).stem)


def parse_topology(spec: str) -> Network:
    """`fat-tree:K`, `leaf-spine:S,L,H`, `bcube:N,K`, or a Mini-NDN file's path."""
    kind, _, args = spec.partition(":")
    if kind in ("fat-tree", "leaf-spine", "bcube"):
        try:
            counts = [int(x) for x in args.split(",")]
        except ValueError:
            counts = []
        if kind == "fat-tree" and len(counts) == 1:
            return fat_tree(counts[0])
        if kind == "leaf-spine" and len(counts) == 3:
            return leaf_spine(*counts)
        if kind == "bcube" and len(counts) == 2:
            return bcube(*counts)
        raise TopologyError(f"{spec}: expected fat-tree:K, leaf-spine:S,L,H or bcube:N,K")
    if not Path(spec).is_file():
        raise TopologyError(f"{spec}: neither fat-tree:K, leaf-spine:S,L,H, bcube:N,K nor a "
                            "readable Mini-NDN topology file")
    return read_minindn(spec)
