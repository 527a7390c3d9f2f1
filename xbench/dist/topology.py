"""Who talks to whom over what: ranks, nodes, NUMA nodes and the link classes between them.

A `Topology` comes from one of two places:

- `Topology.detect()` looks at this job: ranks, local ranks and hosts from `torch.distributed` (or torchrun's
  environment), NUMA nodes from sysfs. On one machine every link is TCP over loopback; `ranks_per_node=2`
  groups the ranks into pretend nodes so the hierarchical algorithms can be run for real.
- `Topology.from_cluster("dgx-h100", accelerators=128)` reads a cluster file in `xbench/dist/clusters/`, in the
  data format of `xbench/hw/targets`: every number a table `{ value, source [, uncertain] }`, a bare number
  refused.

    >>> t = Topology.from_cluster("dgx-a100", accelerators=128)
    >>> t.nodes, t.ranks_per_node, t.link(0, 1).kind, t.link(0, 8).kind
    (16, 8, 'nvlink', 'infiniband')
    >>> t.source("links.inter.bandwidth_bytes_per_s")
"""
from __future__ import annotations

import difflib
import functools
import json
import os
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

CLUSTERS_DIR = Path(__file__).parent / "clusters"
CCLS = ("nccl", "hccl", "flagcx", "gloo")
_LINK_KEYS = {"kind", "topology", "bandwidth_bytes_per_s", "latency_s", "efficiency"}


class TopologyError(ValueError):
    """A cluster name, file or layout xbench cannot use; the message says what to write instead."""

    def __init__(self, message: str):
        super().__init__(f"xbench: {message}")


@dataclass(frozen=True)
class Link:
    """One class of link. `bandwidth` is bytes/s in one direction, nominal: per accelerator for links inside a
    node (per peer for a full mesh), per NIC between nodes. `latency` is the alpha of one step."""

    name: str                   # intra | inter | socket | cross
    kind: str                   # nvlink, infiniband, hccs, roce, xgmi, tcp-loopback, ...
    bandwidth: float
    latency: float
    efficiency: float = 1.0
    topology: str = "switch"    # switch: any pair at full bandwidth; mesh: one link per peer
    sources: Mapping[str, str] = field(default_factory=dict)
    uncertain: frozenset[str] = frozenset()

    @property
    def achievable(self) -> float:
        """Bytes/s an application sees at large messages (bandwidth x efficiency)."""
        return self.bandwidth * self.efficiency

    @property
    def beta(self) -> float:
        """Seconds per byte at the achievable bandwidth."""
        return 1.0 / self.achievable


@dataclass(frozen=True)
class NcclGraph:
    """What NCCL's topology search would report for a node type: the inputs of `ncclTopoTuneModel`."""

    compute_capability: tuple[int, int]
    cpu_vendor: str
    intra_type: str
    channels_intra: int
    bw_intra: float             # GB/s per channel, as NCCL counts it
    channels_inter: int
    bw_inter: float


@dataclass(frozen=True)
class NodeSpec:
    """One kind of node: its accelerators and links."""

    cluster: str
    full_name: str
    accelerator: str            # a target in xbench/hw/targets ('' when local)
    per_node: int
    nics: int
    sockets: int
    numa_nodes: int
    gpus_per_nic: int
    ccl: str
    intra: Link
    inter: Link
    socket: Link | None = None
    nccl: NcclGraph | None = None

    @property
    def rail_bandwidth(self) -> float:
        """Achievable inter-node bytes/s available to one accelerator (its share of the node's NICs)."""
        return self.inter.achievable * self.nics / self.per_node


@dataclass(frozen=True)
class Rank:
    rank: int
    node: int
    local_rank: int
    group: str                  # which NodeSpec (a cluster name, or 'local')
    host: str = ""
    numa: int = 0


@dataclass(frozen=True, eq=False)
class Topology:
    name: str
    full_name: str
    ranks: tuple[Rank, ...]
    specs: Mapping[str, NodeSpec]
    ccl: str
    cross: Link | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    uncertain: frozenset[str] = frozenset()
    origin: str = ""

    # --- shape ---------------------------------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def nodes(self) -> int:
        return len({r.node for r in self.ranks})

    @property
    def ranks_per_node(self) -> int | None:
        """Ranks per node when every node has the same number, else None."""
        counts = {len(v) for v in self.node_ranks().values()}
        return counts.pop() if len(counts) == 1 else None

    @property
    def homogeneous(self) -> bool:
        return len({r.group for r in self.ranks}) == 1

    @property
    def spec(self) -> NodeSpec:
        """The node type of a homogeneous topology."""
        if not self.homogeneous:
            raise TopologyError(f"{self.name} mixes node types {sorted(self.specs)}; ask spec_of(rank) or "
                                f"group(name) instead")
        return self.specs[self.ranks[0].group]

    def spec_of(self, rank: int) -> NodeSpec:
        return self.specs[self.ranks[rank].group]

    def node_ranks(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for r in self.ranks:
            out.setdefault(r.node, []).append(r.rank)
        return out

    def intra_groups(self) -> list[list[int]]:
        """The ranks of each node (subgroups for the intra-node phases)."""
        return [v for _, v in sorted(self.node_ranks().items())]

    def rails(self) -> list[list[int]]:
        """Ranks with the same local rank across nodes (subgroups for the inter-node phase)."""
        out: dict[int, list[int]] = {}
        for r in self.ranks:
            out.setdefault(r.local_rank, []).append(r.rank)
        return [v for _, v in sorted(out.items())]

    def groups(self) -> dict[str, list[int]]:
        """Ranks per homogeneous group (node type)."""
        out: dict[str, list[int]] = {}
        for r in self.ranks:
            out.setdefault(r.group, []).append(r.rank)
        return out

    def subset(self, group: str) -> Topology:
        """The homogeneous part of a heterogeneous topology, renumbered from 0."""
        members = [r for r in self.ranks if r.group == group]
        if not members:
            raise TopologyError(f"{self.name} has no group {group!r}; its groups are {sorted(self.groups())}")
        nodes = {n: i for i, n in enumerate(sorted({r.node for r in members}))}
        ranks = tuple(replace(r, rank=i, node=nodes[r.node]) for i, r in enumerate(members))
        spec = self.specs[group]
        return Topology(f"{self.name}:{group}", spec.full_name, ranks, MappingProxyType({group: spec}), spec.ccl,
                        None, self.sources, self.uncertain, self.origin)

    # --- links ---------------------------------------------------------------------------------------------
    def link(self, a: int, b: int) -> Link:
        """The link class between ranks `a` and `b`."""
        ra, rb = self.ranks[a], self.ranks[b]
        if ra.group != rb.group:
            if self.cross is None:
                raise TopologyError(f"{self.name}: no cross-group link between {ra.group} and {rb.group}")
            return self.cross
        spec = self.specs[ra.group]
        return spec.intra if ra.node == rb.node else spec.inter

    def link_classes(self) -> dict[str, Link]:
        out: dict[str, Link] = {}
        for spec in self.specs.values():
            for link in (spec.intra, spec.inter, spec.socket):
                if link is not None:
                    out.setdefault(f"{spec.cluster}.{link.name}" if not self.homogeneous else link.name, link)
        if self.cross is not None:
            out["cross"] = self.cross
        return out

    def source(self, key: str) -> str:
        """Where the number at dotted `key` came from, e.g. 'links.inter.bandwidth_bytes_per_s'."""
        try:
            return self.sources[key]
        except KeyError:
            close = difflib.get_close_matches(key, list(self.sources), n=3)
            hint = f"; did you mean {', '.join(close)}" if close else ""
            raise TopologyError(f"{self.name} has no number at {key!r}{hint}") from None

    # --- display -------------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        shape = f"{self.nodes} x {self.ranks_per_node}" if self.ranks_per_node else f"{self.nodes} nodes"
        return f"Topology({self.name!r}, {self.world_size} ranks = {shape}, ccl={self.ccl!r})"

    def describe(self) -> str:
        """The links with their numbers and sources; '?' marks uncertain numbers."""
        lines = [f"{self.full_name}: {self!r}"]
        for cls, link in self.link_classes().items():
            mark = "?" if link.uncertain else ""
            lines.append(f"  {cls:<22s} {link.kind:<13s} {link.bandwidth / 1e9:8.1f} GB/s x {link.efficiency:.2f}"
                         f"  alpha {link.latency * 1e6:6.2f} us {mark}")
            for k, s in sorted(link.sources.items()):
                lines.append(f"      {k}: {s}")
        return "\n".join(lines)

    # --- construction --------------------------------------------------------------------------------------
    @classmethod
    def from_cluster(cls, name: str | Path, accelerators: int | None = None) -> Topology:
        """The cluster file `name` (see `list_clusters()`) laid out for `accelerators` (default: one node, or
        one node of each group); accelerators fill nodes in order, the last node may be partial."""
        return _layout(load_cluster(name), accelerators)

    @classmethod
    def detect(cls, group: Any = None, ranks_per_node: int | None = None) -> Topology:
        """This job's topology. With an initialised process group the ranks exchange (host, NUMA node);
        otherwise torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK) is read. `ranks_per_node` overrides
        the host grouping: consecutive ranks form pretend nodes (2 'nodes' x 2 on one machine)."""
        return _detect(group, ranks_per_node)


# --- cluster files -----------------------------------------------------------------------------------------

def list_clusters() -> list[str]:
    return sorted(p.stem for p in CLUSTERS_DIR.glob("*.toml"))


def _values(node: Any, path: str, origin: str, values: dict, sources: dict, uncertain: set) -> None:
    if isinstance(node, dict) and "value" in node:
        if not str(node.get("source", "")).strip():
            raise TopologyError(f"{origin}: {path} has a value but no source; write "
                                f"{{ value = ..., source = \"<URL, document or 'derived: formula'>\" }}")
        extra = set(node) - {"value", "source", "uncertain", "note"}
        if extra:
            raise TopologyError(f"{origin}: {path} has unknown fields {sorted(extra)}")
        values[path] = node["value"]
        sources[path] = str(node["source"])
        if node.get("uncertain", False):
            uncertain.add(path)
    elif isinstance(node, dict):
        for k, v in node.items():
            _values(v, f"{path}.{k}" if path else k, origin, values, sources, uncertain)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _values(v, f"{path}[{i}]", origin, values, sources, uncertain)
    elif isinstance(node, (int, float)) and not isinstance(node, bool) and path != "schema":
        raise TopologyError(f"{origin}: {path} = {node!r} has no source; write "
                            f"{path.rsplit('.', 1)[-1]} = {{ value = {node!r}, source = \"...\" }}")
    else:
        values[path] = node


@dataclass(frozen=True)
class ClusterFile:
    name: str
    full_name: str
    ccl: str
    specs: Mapping[str, NodeSpec]
    shares: Mapping[str, float]
    cross: Link | None
    sources: Mapping[str, str]
    uncertain: frozenset[str]
    origin: str


def _link(name: str, values: dict, sources: dict, uncertain: set, prefix: str, origin: str) -> Link:
    p = f"{prefix}links.{name}"
    keys = {k[len(p) + 1:] for k in values if k.startswith(p + ".")}
    if not keys:
        raise TopologyError(f"{origin}: no [links.{name}] table")
    stray = keys - _LINK_KEYS
    if stray:
        raise TopologyError(f"{origin}: [links.{name}] has unknown keys {sorted(stray)}; allowed: "
                            f"{sorted(_LINK_KEYS)}")
    for need in ("kind", "bandwidth_bytes_per_s", "latency_s"):
        if need not in keys:
            raise TopologyError(f"{origin}: [links.{name}] needs {need}")
    topo = values.get(f"{p}.topology", "switch")
    if topo not in ("switch", "mesh"):
        raise TopologyError(f"{origin}: links.{name}.topology = {topo!r}; write 'switch' or 'mesh'")
    src = {k[len(p) + 1:]: v for k, v in sources.items() if k.startswith(p + ".")}
    unc = frozenset(k[len(p) + 1:] for k in uncertain if k.startswith(p + "."))
    return Link(name, str(values[f"{p}.kind"]), float(values[f"{p}.bandwidth_bytes_per_s"]),
                float(values[f"{p}.latency_s"]), float(values.get(f"{p}.efficiency", 1.0)), topo,
                MappingProxyType(src), unc)


def _node_spec(name: str, data: dict, origin: str) -> tuple[NodeSpec, dict, set]:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    uncertain: set[str] = set()
    _values(data, "", origin, values, sources, uncertain)

    def need(key: str) -> Any:
        if key not in values:
            raise TopologyError(f"{origin}: missing {key}")
        return values[key]

    ccl = need("ccl")
    if ccl not in CCLS:
        raise TopologyError(f"{origin}: ccl = {ccl!r}; write one of {CCLS}")
    accelerator = str(need("node.accelerator"))
    from ..hw.target import get_target

    get_target(accelerator)                     # a typo in the accelerator name fails here, with suggestions
    nccl = None
    if "nccl.channels_inter" in values:
        major, minor = str(need("nccl.compute_capability")).split(".")
        nccl = NcclGraph((int(major), int(minor)), str(values.get("nccl.cpu_vendor", "intel")),
                         str(values.get("nccl.intra_type", "nvlink")), int(need("nccl.channels_intra")),
                         float(need("nccl.bw_intra_per_channel_GBps")), int(need("nccl.channels_inter")),
                         float(need("nccl.bw_inter_per_channel_GBps")))
    socket_link = _link("socket", values, sources, uncertain, "", origin) if any(
        k.startswith("links.socket.") for k in values) else None
    spec = NodeSpec(name, str(values.get("full_name", name)), accelerator, int(need("node.accelerators")),
                    int(need("node.nics")), int(values.get("node.sockets", 1)), int(values.get("node.numa_nodes", 1)),
                    int(values.get("node.gpus_per_nic", 1)), ccl,
                    _link("intra", values, sources, uncertain, "", origin),
                    _link("inter", values, sources, uncertain, "", origin), socket_link, nccl)
    return spec, sources, uncertain


@functools.cache
def _load_file(path: str) -> ClusterFile:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TopologyError(f"{p}: not valid TOML: {e}") from e
    if data.get("name") != p.stem:
        raise TopologyError(f"{p}: name = {data.get('name')!r} but the file is {p.name}; make them agree")
    origin = str(p)
    if "group" not in data:
        spec, sources, uncertain = _node_spec(p.stem, data, origin)
        return ClusterFile(p.stem, spec.full_name, spec.ccl, MappingProxyType({p.stem: spec}),
                           MappingProxyType({p.stem: 1.0}), None, MappingProxyType(sources), frozenset(uncertain),
                           origin)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    uncertain: set[str] = set()
    _values({k: v for k, v in data.items() if k != "group"}, "", origin, values, sources, uncertain)
    specs: dict[str, NodeSpec] = {}
    shares: dict[str, float] = {}
    for i, g in enumerate(data["group"]):
        gv: dict[str, Any] = {}
        _values(g, f"group[{i}]", origin, gv, sources, uncertain)
        if "cluster" not in g:
            raise TopologyError(f"{origin}: group #{i + 1} needs cluster = \"<a file in {CLUSTERS_DIR}>\"")
        member = load_cluster(str(g["cluster"]))
        if len(member.specs) != 1:
            raise TopologyError(f"{origin}: group {g.get('name')!r} names {g['cluster']!r}, itself heterogeneous")
        spec = next(iter(member.specs.values()))
        specs[spec.cluster] = spec
        shares[spec.cluster] = float(gv.get(f"group[{i}].share", 1.0 / len(data["group"])))
        for k, s in member.sources.items():
            sources[f"{spec.cluster}.{k}"] = s
        uncertain |= {f"{spec.cluster}.{k}" for k in member.uncertain}
    if abs(sum(shares.values()) - 1.0) > 1e-9:
        raise TopologyError(f"{origin}: group shares add up to {sum(shares.values())}, not 1")
    cross = _link("cross", values, sources, uncertain, "", origin)
    ccl = str(values.get("ccl", "flagcx"))
    return ClusterFile(p.stem, str(values.get("full_name", p.stem)), ccl, MappingProxyType(specs),
                       MappingProxyType(shares), cross, MappingProxyType(sources), frozenset(uncertain), origin)


def load_cluster(name: str | Path) -> ClusterFile:
    """A cluster file by name (`list_clusters()`) or path."""
    p = Path(name)
    if p.suffix == ".toml" and p.is_file():
        return _load_file(str(p.resolve()))
    key = str(name).strip().lower().replace("_", "-")
    path = CLUSTERS_DIR / f"{key}.toml"
    if not path.is_file():
        known = list_clusters()
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TopologyError(f"unknown cluster {name!r}{hint}; known clusters: {', '.join(known)}")
    return _load_file(str(path))


def _layout(cf: ClusterFile, accelerators: int | None) -> Topology:
    specs = list(cf.specs.values())
    if accelerators is None:
        counts = {s.cluster: s.per_node for s in specs}
    else:
        if accelerators < 1:
            raise TopologyError(f"accelerators = {accelerators}; write a positive count")
        counts = {}
        left = accelerators
        for i, s in enumerate(specs):
            n = left if i == len(specs) - 1 else int(round(accelerators * cf.shares[s.cluster]))
            counts[s.cluster] = n
            left -= n
    ranks: list[Rank] = []
    node = 0
    for s in specs:
        n = counts[s.cluster]
        for i in range(n):
            local = i % s.per_node
            numa = local * s.numa_nodes // s.per_node
            ranks.append(Rank(len(ranks), node + i // s.per_node, local, s.cluster, f"{s.cluster}-{i // s.per_node}",
                              numa))
        node += -(-n // s.per_node)
    return Topology(cf.name, cf.full_name, tuple(ranks), cf.specs, cf.ccl, cf.cross, cf.sources, cf.uncertain,
                    cf.origin)


# --- local detection ---------------------------------------------------------------------------------------

def numa_nodes() -> dict[int, set[int]]:
    """NUMA node -> CPU ids, from /sys/devices/system/node (one node holding every CPU where sysfs has none)."""
    root = Path("/sys/devices/system/node")
    out: dict[int, set[int]] = {}
    for d in sorted(root.glob("node[0-9]*")):
        try:
            out[int(d.name[4:])] = _cpulist((d / "cpulist").read_text())
        except (OSError, ValueError):
            continue
    return out or {0: set(range(os.cpu_count() or 1))}


def _cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def my_numa_node() -> int:
    """The NUMA node holding most of this process's allowed CPUs."""
    try:
        mine = os.sched_getaffinity(0)
    except AttributeError:
        mine = set(range(os.cpu_count() or 1))
    nodes = numa_nodes()
    return max(nodes, key=lambda n: (len(nodes[n] & mine), -n))


def loopback_link(world_size: int, name: str = "intra") -> Link:
    """TCP over 127.0.0.1 as gloo sees it: the fit stored by `xbench.dist.calibrate` for this world size when
    there is one, else the figures measured when this layer was written (docs/distributed.md)."""
    from ..config import cache_dir

    path = Path(cache_dir("dist")) / f"loopback-gloo-p{world_size}.json"
    if path.is_file():
        try:
            fit = json.loads(path.read_text())
            src = f"measured {fit['date']}: alpha-beta fit of gloo ring AllReduce sweeps, {path}"
            return Link(name, "tcp-loopback", float(fit["bandwidth"]), float(fit["alpha"]), 1.0, "switch",
                        MappingProxyType({"bandwidth_bytes_per_s": src, "latency_s": src}), frozenset())
        except (KeyError, ValueError, json.JSONDecodeError):
            pass
    alpha, bw = (2.1e-3, 1.8e9) if world_size <= 2 else (0.43e-3, 0.41e9)
    src = ("measured on a 2-core VM (docs/distributed.md): 2 ranks ~2.1 ms + n/1.8 GB/s, 4 ranks ~0.43 ms + "
           "n/0.41 GB/s; run xbench.dist.calibrate for this machine")
    return Link(name, "tcp-loopback", bw, alpha, 1.0, "switch",
                MappingProxyType({"bandwidth_bytes_per_s": src, "latency_s": src}),
                frozenset({"bandwidth_bytes_per_s", "latency_s"}))


def _detect(group: Any, ranks_per_node: int | None) -> Topology:
    me = {"host": socket.gethostname(), "numa": my_numa_node()}
    infos: list[dict]
    try:
        import torch.distributed as dist
        initialised = dist.is_available() and dist.is_initialized()
    except ImportError:
        initialised = False
    if initialised:
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        infos = [None] * world  # type: ignore[list-item]
        dist.all_gather_object(infos, {**me, "rank": rank}, group=group)
    else:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
        group_rank = int(os.environ.get("GROUP_RANK", str(rank // max(local_world, 1))))
        infos = [{"host": f"{me['host']}#{r // local_world}" if r // local_world != group_rank else me["host"],
                  "numa": me["numa"], "rank": r} for r in range(world)]
    if ranks_per_node is not None:
        if ranks_per_node < 1 or world % ranks_per_node:
            raise TopologyError(f"ranks_per_node = {ranks_per_node} does not divide the {world} ranks; write a "
                                f"divisor of {world}")
        node_of = [r // ranks_per_node for r in range(world)]
    else:
        hosts: dict[str, int] = {}
        node_of = [hosts.setdefault(i["host"], len(hosts)) for i in infos]
    local_seen: dict[int, int] = {}
    ranks = []
    for r, info in enumerate(infos):
        n = node_of[r]
        local = local_seen.get(n, 0)
        local_seen[n] = local + 1
        ranks.append(Rank(r, n, local, "local", info["host"], int(info["numa"])))
    per_node = max(local_seen.values())
    spec = NodeSpec("local", f"{socket.gethostname()} (gloo over TCP loopback)", "", per_node, per_node,
                    1, len(numa_nodes()), 1, "gloo", loopback_link(world, "intra"), loopback_link(world, "inter"))
    return Topology("local", spec.full_name, tuple(ranks), MappingProxyType({"local": spec}), "gloo")
