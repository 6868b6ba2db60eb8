"""The network the placement plans for: nodes, full-duplex links with a capacity per direction,
and the one path the gradients take between two nodes. Generated (fat-tree, leaf-spine, BCube)
or read from a Mini-NDN topology file.

Nodes: hosts run apps and forward nothing (a generated topology's servers); switches are
forwarders, the aggregator candidates, and an app may run on one (using it as its edge, as an
app on a Mini-NDN node uses that node's NFD); relays forward and do nothing else (a Mini-NDN
file's `[switches]`).

Units: capacities in Mbit/s (Mini-NDN's `bw=`), and every rate the LP gives back in the same
unit. Paths: least cost (a link costs 1, a hop, unless it says; a Mini-NDN file's links cost
their delay in ms, as NLSR's link cost), ties by fewer hops; among equal next hops one is chosen
by a stable hash, as ECMP spreads flows. A generated network hashes the (source, destination)
pair once for the whole path. A network with `fib` set routes as NDN forwards: every node picks
its own next hop toward a destination by the (node, destination) pair, as its FIB would, and the
path of a gradient from src to dst is the way its Data travels: back along the path dst's
Interests take toward src.
"""
from __future__ import annotations

import heapq
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

DEFAULT_BW = 100.0            # Mbit/s: a generated topology's links, and a file's without bw=
NLSR_COST = 10.0              # a Mini-NDN link's cost without delay= (NLSR's: 10 ms)


class TopologyError(ValueError):
    """A bad topology: the message names the offending node, link or key."""


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    bw: float | None = DEFAULT_BW     # Mbit/s, each direction; None: a file's link without bw=
    delay_ms: float | None = None     # None: not given (so for loss and jitter)
    loss: float | None = None         # percent, as Mini-NDN writes it
    jitter_ms: float | None = None
    cost: float = 1.0                 # routing cost

    @property
    def capacity(self) -> float:
        """Mbit/s each way to plan with (DEFAULT_BW when the link does not say)."""
        return DEFAULT_BW if self.bw is None else self.bw


@dataclass
class Network:
    hosts: list[str] = field(default_factory=list)       # run apps, forward nothing
    switches: list[str] = field(default_factory=list)    # forwarders: aggregator candidates
    links: list[Link] = field(default_factory=list)
    name: str = ""
    relays: list[str] = field(default_factory=list)      # forward only (no apps, no sums)
    fib: bool = False                                    # route per node, as a FIB (above)

    def __post_init__(self) -> None:
        self._adj: dict[str, list[str]] = {}
        self._bw: dict[tuple[str, str], float] = {}
        self._cost: dict[tuple[str, str], int] = {}      # thousandths: sums stay exact
        self._nexts: dict[str, dict[str, list[str]]] = {}
        self._paths: dict[tuple[str, str], list[tuple[str, str]]] = {}
        nodes = self.nodes
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
            if not link.capacity > 0:
                raise TopologyError(f"link {link.a}:{link.b}: bw must be > 0, got {link.bw}")
            if not 0 <= link.cost < float("inf"):
                raise TopologyError(f"link {link.a}:{link.b}: cost must be >= 0, got "
                                    f"{link.cost}")
            self._adj[link.a].append(link.b)
            self._adj[link.b].append(link.a)
            self._bw[(link.a, link.b)] = self._bw[(link.b, link.a)] = link.capacity
            self._cost[(link.a, link.b)] = self._cost[(link.b, link.a)] = round(link.cost * 1000)
        for n in self._adj:
            self._adj[n].sort()
        self._ends = {n for n, adj in self._adj.items() if len(adj) == 1}   # one link each

    @property
    def nodes(self) -> list[str]:
        return self.hosts + self.switches + self.relays

    def node(self, name: str) -> str:
        """The node called `name`, or written alike but for case (Mini-NDN reads its files'
        names case-insensitively); TopologyError naming it when there is none."""
        if name in self._adj:
            return name
        alike = [n for n in self._adj if n.lower() == name.lower()]
        if len(alike) != 1:
            raise TopologyError(f"no node {name!r} in {self.name or 'the network'}")
        return alike[0]

    def neighbours(self, node: str) -> list[str]:
        return self._adj[node]

    def capacity(self, a: str, b: str) -> float:
        """Mbit/s from a to b (one direction of a link)."""
        return self._bw[(a, b)]

    def directed_links(self) -> list[tuple[str, str]]:
        return sorted(self._bw)

    def _equal_nexts(self, dst: str) -> dict[str, list[str]]:
        """Every node's neighbours on a least-cost path to `dst` — least cost, then fewest
        hops — in name order (for each node that reaches it but `dst`; cached per
        destination). Dijkstra from `dst`, each node keeping every neighbour that reached it
        at its least distance. A node on one link (a host) is on no one's way but its own:
        it is left out of the search and given its neighbour after (a fat-tree's hosts are
        most of its nodes)."""
        if dst not in self._nexts:
            dist = {dst: (0, 0)}
            nexts: dict[str, list[str]] = {}
            todo = [(0, 0, dst)]
            ends, costs = self._ends, self._cost
            while todo:
                cost, hops, n = heapq.heappop(todo)
                if (cost, hops) > dist[n]:
                    continue
                for m in self._adj[n]:
                    if m in ends and m != dst:
                        continue
                    d = (cost + costs[(m, n)], hops + 1)
                    old = dist.get(m)
                    if old is None or d < old:
                        dist[m] = d
                        nexts[m] = [n]
                        heapq.heappush(todo, (*d, m))
                    elif d == old:
                        nexts[m].append(n)
            for m, hs in nexts.items():
                if len(hs) > 1:
                    hs.sort()                       # as self._adj[m] lists them
            for m in ends:
                if m != dst and self._adj[m][0] in dist:
                    nexts[m] = self._adj[m]
            self._nexts[dst] = nexts
        return self._nexts[dst]

    def next_hops(self, dst: str, among: Iterable[str] | None = None) -> dict[str, str]:
        """`next_hop(node, dst)` of every node but `dst` (or of those `among` it): one search
        for the destination instead of a walk for each node, as a router fills its FIB."""
        self._check(dst)
        nodes = [n for n in (self._adj if among is None else among) if n != dst]
        # a host on one link: every other node's least-cost paths to it are those to its one
        # neighbour, then that link (the same next hops): hosts share their switch's search
        via = self._adj[dst][0] if dst in self._ends else dst
        nexts = self._equal_nexts(via)
        out = {}
        for n in nodes:
            hops = [dst] if n == via != dst else nexts.get(n)
            if hops is None:
                raise TopologyError(f"no path from {n!r} to {dst!r}")
            out[n] = hops[zlib.crc32(f"{n}>{dst}".encode()) % len(hops)]
        return out

    def _check(self, *ends: str) -> None:
        for end in ends:
            if end not in self._adj:
                raise TopologyError(f"no node {end!r}")

    def _walk(self, src: str, dst: str, spread: Callable[[str], int]) -> list[tuple[str, str]]:
        """From `src` to `dst` along least-cost next hops, `spread(node)` choosing among
        equal ones."""
        equal = self._equal_nexts(dst)
        if src != dst and src not in equal:
            raise TopologyError(f"no path from {src!r} to {dst!r}")
        out, node = [], src
        while node != dst:
            nexts = equal[node]
            nxt = nexts[spread(node) % len(nexts)]
            out.append((node, nxt))
            node = nxt
        return out

    def next_hop(self, node: str, dst: str) -> str:
        """The neighbour `node` forwards toward `dst` through (with `fib`: its route)."""
        self._check(node, dst)
        if node == dst:
            raise TopologyError(f"{node!r} is the destination itself")
        return self.path(node, dst)[0][1] if not self.fib else \
            self._walk(node, dst, lambda n: zlib.crc32(f"{n}>{dst}".encode()))[0][1]

    def path(self, src: str, dst: str) -> list[tuple[str, str]]:
        """The directed links from `src` to `dst` along one least-cost path ([] when equal);
        with `fib`, the way Data from src to dst goes (the reverse of dst's Interests' path)."""
        self._check(src, dst)
        if (src, dst) not in self._paths:           # the LP asks for the same ones often
            if self.fib:
                back = self._walk(dst, src, lambda n: zlib.crc32(f"{n}>{src}".encode()))
                self._paths[src, dst] = [(b, a) for a, b in reversed(back)]
            else:
                spread = zlib.crc32(f"{src}>{dst}".encode())
                self._paths[src, dst] = self._walk(src, dst, lambda n: spread)
        return list(self._paths[src, dst])

    def edge_of(self, host: str) -> str:
        """The forwarder an app on `host` uses: the node itself if it is a switch (a
        forwarder), else its one switch neighbour (its ToR), or the first by name when it has
        several."""
        self._check(host)
        if host in self.switches:
            return host
        if host in self.relays:
            raise TopologyError(f"{host!r}: a switch of the file's [switches] forwards only "
                                "(it runs no apps)")
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
    """BCube(n, k) (Guo et al., SIGCOMM 2009; the network of BCube hierarchical
    synchronisation, docs/collectives.md): n^k hosts p0… with k-digit
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


_NUMBER = re.compile(r"^([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_OPTION = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*=")
SECTIONS = ("nodes", "switches", "links", "faces")
_TIME = {"ms": 1.0, "s": 1000.0, "us": 1e-3}          # netem's units, in ms
# Mininet's other link options (TCLink): accepted, and not emulated here
IGNORED_LINK_OPTIONS = ("max_queue_size", "speedup", "use_hfsc", "use_tbf", "latency_ms",
                        "enable_ecn", "enable_red", "gro", "txo", "rxo")


def _value(text: str, key: str, where: str, units: dict[str, float]) -> float:
    m = _NUMBER.match(text.strip())
    if not m or m.group(2).lower() not in units:
        raise TopologyError(f"{where}: {key}={text!r} is not a number "
                            f"(units: {', '.join(u or 'none' for u in units)})")
    return float(m.group(1)) * units[m.group(2).lower()]


def _sections(path: str | Path) -> dict[str, list[tuple[int, str]]]:
    """The file's `[section]`s and their lines (numbered; comments — a line starting with
    `#` or `;`, as configparser, which Mini-NDN reads them with, or the rest of a line after
    ` #` — and blank lines dropped)."""
    out: dict[str, list[tuple[int, str]]] = {}
    current = None
    for n, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if line.startswith(("#", ";")):
            continue
        line = line.split(" #", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            if current not in SECTIONS:
                raise TopologyError(f"{path}:{n}: [{current}]: unknown section (known: "
                                    f"{', '.join(SECTIONS)})")
            if current in out:
                raise TopologyError(f"{path}:{n}: [{current}]: given twice")
            out[current] = []
        elif current is None:
            raise TopologyError(f"{path}:{n}: a line before any [section]")
        else:
            out[current].append((n, line))
    return out


def _node_line(line: str, where: str) -> str:
    """`name: _ key=value ...`: the name. The options (NFD's and NLSR's: radius=, angle=,
    network=, router=, log levels ...) are checked for shape and not used."""
    head, *options = line.split()
    name, _, rest = head.partition(":")
    if not _NAME.match(name):
        raise TopologyError(f"{where}: {name!r} is not a node name (letters, digits, _ . -)")
    for option in ([rest] if rest else []) + options:
        if option != "_" and not _OPTION.match(option):
            raise TopologyError(f"{where}: node {name}: {option!r} is not key=value")
    return name


def _link_line(line: str, where: str, named: dict[str, str]) -> Link:
    """`a:b delay=10ms bw=100 loss=1 jitter=1ms ...`, its ends among the nodes `named`
    (lower-cased name -> name)."""
    ends, *options = line.split()
    a, sep, b = ends.partition(":")
    where = f"{where}: link {ends}"
    if not sep or not a or not b or ":" in b:
        raise TopologyError(f"{where}: expected a:b")
    for end in (a, b):
        if end.lower() not in named:
            raise TopologyError(f"{where}: no node {end!r} in [nodes] or [switches]")
    a, b = named[a.lower()], named[b.lower()]
    if a == b:
        raise TopologyError(f"{where}: a node linked to itself")
    kw: dict[str, float] = {}
    for option in options:
        key, eq, value = option.partition("=")
        if not eq:
            raise TopologyError(f"{where}: {option!r} is not key=value")
        if key in kw or (key == "delay" and "delay_ms" in kw) or \
                (key == "jitter" and "jitter_ms" in kw):
            raise TopologyError(f"{where}: {key} given twice")
        if key == "bw":
            kw["bw"] = _value(value, key, where, {"": 1.0, "mbit": 1.0, "gbit": 1000.0})
            if not kw["bw"] > 0:
                raise TopologyError(f"{where}: bw must be > 0 Mbit/s, got {value!r}")
        elif key in ("delay", "jitter"):
            kw[f"{key}_ms"] = _value(value, key, where, _TIME)
        elif key == "loss":
            kw["loss"] = _value(value, key, where, {"": 1.0})
            if kw["loss"] > 100:
                raise TopologyError(f"{where}: loss is a percentage (0-100), got {value!r}")
        elif key not in IGNORED_LINK_OPTIONS:
            raise TopologyError(f"{where}: unknown option {key!r} (known: bw, delay, loss, "
                                f"jitter; accepted and not emulated: "
                                f"{', '.join(IGNORED_LINK_OPTIONS)})")
    # NLSR's link cost, which Mini-NDN's routes follow: the delay in ms
    cost = kw.get("delay_ms", NLSR_COST)
    return Link(a, b, kw.get("bw"), kw.get("delay_ms"), kw.get("loss"), kw.get("jitter_ms"),
                cost)


def read_minindn(path: str | Path) -> Network:
    """A Mini-NDN topology file, as Mini-NDN means it: every `[nodes]` entry (`name: _
    key=value ...`) an NDN node with its own forwarder, where apps may run and which may
    aggregate; `[switches]` Mininet's layer-2 switches, which forward only (relays); `[links]`
    `a:b delay=10ms bw=100 loss=1 jitter=1ms` (bw in Mbit/s, DEFAULT_BW to plan with when not
    given; loss in percent); `[faces]` (NLSR's extra neighbours) accepted and not used. Routes
    follow NLSR's: least total delay (`fib`). Names are matched case-insensitively, as
    Mini-NDN's configparser does; every error names the file, the line and the key."""
    try:
        sections = _sections(path)
    except (OSError, UnicodeDecodeError) as e:
        raise TopologyError(f"{path}: cannot read it ({e})") from None
    if "nodes" not in sections or "links" not in sections:
        raise TopologyError(f"{path}: needs [nodes] and [links]")
    named: dict[str, str] = {}                 # lower-cased -> as written
    kinds: dict[str, list[str]] = {"nodes": [], "switches": []}
    for section, names in kinds.items():
        for n, line in sections.get(section, []):
            name = _node_line(line, f"{path}:{n}")
            if name.lower() in named:
                raise TopologyError(f"{path}:{n}: node {name!r}: named twice (Mini-NDN reads "
                                    "names case-insensitively)")
            named[name.lower()] = name
            names.append(name)
    if not kinds["nodes"]:
        raise TopologyError(f"{path}: [nodes] names no node")
    links: list[Link] = []
    seen: dict[frozenset[str], int] = {}
    for n, line in sections["links"]:
        link = _link_line(line, f"{path}:{n}", named)
        pair = frozenset((link.a, link.b))
        if pair in seen:
            raise TopologyError(f"{path}:{n}: link {line.split()[0]}: given twice (line "
                                f"{seen[pair]})")
        seen[pair] = n
        links.append(link)
    for n, line in sections.get("faces", []):
        ends = line.split()[0]
        a, sep, b = ends.partition(":")
        if not sep or a.lower() not in named or b.lower() not in named:
            raise TopologyError(f"{path}:{n}: face {ends}: expected a:b, two nodes of the file")
    return Network([], kinds["nodes"], links, Path(path).stem, relays=kinds["switches"],
                   fib=True)


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
