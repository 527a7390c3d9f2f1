"""Cluster files (every number sourced, loader errors that say what to write), layouts of accelerators into
nodes, link classes between ranks, and local detection from torchrun's environment and sysfs."""
from __future__ import annotations

import json
import tomllib

import pytest

from xbench.dist import topology as T
from xbench.dist.topology import CLUSTERS_DIR, Topology, TopologyError, list_clusters, load_cluster


def test_the_four_clusters():
    assert list_clusters() == ["atlas-800t-a2", "dgx-a100", "dgx-h100", "hetero-h100-910b"]


def _numbers(node, path=""):
    if isinstance(node, dict):
        if "value" in node:
            yield path, bool(str(node.get("source", "")).strip())
            return
        for k, v in node.items():
            yield from _numbers(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool) and path != "schema":
        yield path, False


@pytest.mark.parametrize("name", ["atlas-800t-a2", "dgx-a100", "dgx-h100", "hetero-h100-910b"])
def test_every_number_has_a_source(name):
    raw = tomllib.loads((CLUSTERS_DIR / f"{name}.toml").read_text())
    found = list(_numbers(raw))
    assert len(found) >= 3
    assert all(ok for _, ok in found), [p for p, ok in found if not ok]


def test_a_bare_number_is_refused(tmp_path):
    text = (CLUSTERS_DIR / "dgx-a100.toml").read_text().replace(
        'nics = { value = 8, source = "DGX A100 datasheet: 8x single-port Mellanox ConnectX-6 VPI 200 Gb/s HDR '
        'InfiniBand (compute fabric)" }', "nics = 8")
    p = tmp_path / "dgx-a100.toml"
    p.write_text(text)
    with pytest.raises(TopologyError, match=r"node.nics = 8 has no source; write nics = \{ value = 8"):
        load_cluster(p)


def test_unknown_cluster_suggests():
    with pytest.raises(TopologyError, match="did you mean 'dgx-h100'"):
        Topology.from_cluster("dgx-h10")


def test_layout_and_links():
    t = Topology.from_cluster("dgx-a100", accelerators=128)
    assert (t.world_size, t.nodes, t.ranks_per_node) == (128, 16, 8)
    assert t.link(0, 7).kind == "nvlink" and t.link(7, 8).kind == "infiniband"
    assert t.intra_groups()[1] == list(range(8, 16))
    assert t.rails()[3] == list(range(3, 128, 8))
    assert t.spec.nics == 8 and t.spec.rail_bandwidth == pytest.approx(25e9 * 0.92)
    assert "datasheet" in t.source("node.accelerators")
    partial = Topology.from_cluster("dgx-h100", accelerators=12)
    assert partial.nodes == 2 and partial.ranks_per_node is None


def test_ascend_mesh_and_numa():
    t = Topology.from_cluster("atlas-800t-a2", accelerators=16)
    assert t.spec.intra.topology == "mesh" and t.spec.inter.kind == "roce"
    assert [r.numa for r in t.ranks[:8]] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert "hccs" in t.describe()


def test_heterogeneous_groups():
    t = Topology.from_cluster("hetero-h100-910b", accelerators=32)
    assert not t.homogeneous
    assert {g: len(r) for g, r in t.groups().items()} == {"dgx-h100": 16, "atlas-800t-a2": 16}
    assert t.link(0, 31).name == "cross" and t.link(0, 31).kind == "roce"
    assert t.link(16, 17).kind == "hccs"
    sub = t.subset("atlas-800t-a2")
    assert sub.world_size == 16 and sub.ranks[0].rank == 0 and sub.spec.ccl == "hccl"
    with pytest.raises(TopologyError, match="mixes node types"):
        _ = t.spec


def test_detect_from_torchrun_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("GROUP_RANK", "0")
    t = Topology.detect()
    assert (t.world_size, t.nodes, t.ranks_per_node) == (4, 2, 2)
    assert t.link(0, 1).kind == "tcp-loopback" and t.link(1, 2).name == "inter"
    pretend = Topology.detect(ranks_per_node=1)
    assert pretend.nodes == 4
    with pytest.raises(TopologyError, match="does not divide the 4 ranks"):
        Topology.detect(ranks_per_node=3)


def test_cpulist_and_numa_nodes():
    assert T._cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    nodes = T.numa_nodes()
    assert nodes and all(isinstance(c, set) and c for c in nodes.values())
    assert T.my_numa_node() in nodes


def test_loopback_link_uses_a_stored_fit(tmp_path, monkeypatch):
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(tmp_path))
    fallback = T.loopback_link(2)
    assert fallback.uncertain and fallback.latency == pytest.approx(2.1e-3)
    (tmp_path / "dist").mkdir(exist_ok=True)
    (tmp_path / "dist" / "loopback-gloo-p2.json").write_text(json.dumps(
        {"alpha": 1e-4, "bandwidth": 2e9, "date": "2026-01-01"}))
    fit = T.loopback_link(2)
    assert (fit.latency, fit.bandwidth, fit.uncertain) == (1e-4, 2e9, frozenset())
    assert "measured 2026-01-01" in fit.sources["latency_s"]
