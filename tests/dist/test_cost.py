"""The collective cost model against hand-computed alpha-beta formulas, the worked example of the design
notes, NCCL's tuning model entry by entry, HCCL's documented rules and the FlagCX-style plan."""
from __future__ import annotations

import pytest

from xbench.dist import cost, flagcx, hccl, nccl
from xbench.dist.topology import CLUSTERS_DIR, Topology, TopologyError

GiB, KiB = 1 << 30, 1 << 10
A100_NVLINK = 300e9 * 0.783
HDR = 25e9 * 0.92


def test_bus_factors_follow_nccl_tests():
    assert cost.bus_factor("allreduce", 8) == pytest.approx(1.75)
    for c in ("reduce_scatter", "all_gather", "all_to_all"):
        assert cost.bus_factor(c, 8) == pytest.approx(7 / 8)
    with pytest.raises(TopologyError, match="write one of allreduce"):
        cost.bus_factor("allreduce_sum", 2)


def test_ring_on_one_node():
    t = Topology.from_cluster("dgx-a100", accelerators=8)
    e = cost.estimate("allreduce", GiB, t, "ring")
    assert e.latency == pytest.approx(14 * 3.4e-6)
    assert e.transfer == pytest.approx(2 * 7 / 8 * GiB / A100_NVLINK)
    assert e.busbw == pytest.approx(GiB / e.time * 1.75)
    assert e.bytes_per_rank == {"intra (nvlink)": pytest.approx(1.75 * GiB)}
    rs = cost.estimate("reduce_scatter", GiB, t, "ring")
    assert rs.transfer == pytest.approx(7 / 8 * GiB / A100_NVLINK) and rs.steps == 7


def test_ring_across_nodes_counts_steps_like_nccl():
    t = Topology.from_cluster("dgx-a100", accelerators=128)
    e = cost.estimate("allreduce", GiB, t, "ring")
    assert e.steps == 254
    assert e.latency == pytest.approx((254 - 32) * 3.4e-6 + 32 * 14e-6)
    assert e.transfer == pytest.approx(2 * 127 / 128 * GiB / (8 * HDR))      # one ring per NIC
    assert e.bound == "inter (infiniband)"
    assert e.peak_busbw == pytest.approx(200e9) and e.efficiency == pytest.approx(e.busbw / 200e9)


def test_recursive_halving_doubling():
    t = Topology.from_cluster("dgx-a100", accelerators=8)
    e = cost.estimate("allreduce", GiB, t, "rhd")
    assert e.steps == 6 and e.latency == pytest.approx(6 * 3.4e-6)
    assert e.transfer == pytest.approx(2 * 7 / 8 * GiB / A100_NVLINK)
    odd = cost.estimate("allreduce", GiB, Topology.from_cluster("dgx-a100", accelerators=6), "rhd")
    assert odd.steps == 4 + 2 and "fold in and out" in odd.note


def test_hierarchical():
    t = Topology.from_cluster("dgx-a100", accelerators=16)
    e = cost.estimate("allreduce", GiB, t, "hier")
    intra = 2 * (7 * 3.4e-6 + 7 / 8 * GiB / A100_NVLINK)
    rail = HDR                                    # one NIC per GPU: each rank's own rail
    inter = 2 * (14e-6 + 1 / 2 * (GiB / 8) / rail)
    assert e.time == pytest.approx(intra + inter, rel=1e-9)
    assert e.bytes_per_rank["inter (infiniband)"] == pytest.approx(2 * 1 / 2 * GiB / 8)
    with pytest.raises(TopologyError, match="several nodes"):
        cost.estimate("allreduce", GiB, Topology.from_cluster("dgx-a100", accelerators=8), "hier")


def test_the_design_notes_worked_example(tmp_path):
    # 16 nodes x 8 GPUs, NVLink 240 GB/s, one 200 Gb/s NIC per node at 92 %: 1 GiB ~ 93 ms, every algorithm
    text = (CLUSTERS_DIR / "dgx-a100.toml").read_text()
    one_nic = text.replace('nics = { value = 8,', 'nics = { value = 1,').replace('name = "dgx-a100"',
                                                                                   'name = "one-nic"')
    (tmp_path / "one-nic.toml").write_text(one_nic)
    t = Topology.from_cluster(tmp_path / "one-nic.toml", accelerators=128)
    for alg in ("ring", "tree", "hier"):
        assert 0.085 < cost.estimate("allreduce", GiB, t, alg).time < 0.1, alg
    eight = Topology.from_cluster("dgx-a100", accelerators=128)
    assert 0.012 < cost.estimate("allreduce", GiB, eight, "ring").time < 0.015
    assert cost.estimate("allreduce", 64 * KiB, eight, "ring").time == pytest.approx(1.2e-3, rel=0.01)


def test_choose_explains():
    t = Topology.from_cluster("dgx-a100", accelerators=128)
    small = cost.choose("allreduce", 64 * KiB, t)
    assert small.algorithm in ("rhd", "tree") and "latency-bound" in small.why and "alpha steps" in small.why
    assert small.time == min(e.time for e in cost.candidates("allreduce", 64 * KiB, t))
    big = cost.choose("allreduce", GiB, t)
    assert "bandwidth-bound" in big.why
    assert cost.crossover("allreduce", t, "tree", "ring") > GiB


def test_all_to_all_on_two_levels():
    t = Topology.from_cluster("dgx-h100", accelerators=16)
    e = cost.estimate("all_to_all", 16 * (1 << 20), t, "pairwise")
    n = 16 << 20
    assert e.bytes_per_rank == {"intra (nvlink)": pytest.approx(7 / 16 * n), "inter (infiniband)": pytest.approx(n / 2)}
    assert e.transfer == pytest.approx(max(7 / 16 * n / (450e9 * 0.8), n / 2 / (50e9 * 0.92)))


def test_nccl_model_entry_by_entry():
    t = Topology.from_cluster("dgx-a100", accelerators=16)
    table = {(a, p): (lat, bw) for a, p, lat, bw in nccl.tune("allreduce", t)}
    lat, bw = table[("ring", "Simple")]
    assert bw == pytest.approx(8 * 24.0 * 16 / 30)                     # busBw x nRanks / nsteps
    assert lat == pytest.approx(8.4 + 26 * max(3.4, 2.0 * 3) + 4 * 14.0)  # AMD host: net overhead 2 us x 3
    assert table[("tree", "Simple")][1] == pytest.approx(min(8 * 24 * 0.92, 8 * 23.6) * 0.5)
    e = nccl.predict("allreduce", GiB, t)
    assert (e.algorithm, e.protocol) == ("ring", "Simple")
    assert e.time == pytest.approx((lat * 1.4 + GiB / (1000 * bw)) * 1e-6)   # plateau factor on multi-node rings
    small = nccl.predict("allreduce", 64 * KiB, Topology.from_cluster("dgx-a100", accelerators=128))
    assert (small.algorithm, small.protocol) == ("tree", "LL") and 50e-6 < small.time < 100e-6
    with pytest.raises(TopologyError, match="send/recv"):
        nccl.tune("all_to_all", t)


def test_hccl_rules():
    assert hccl.default_level1(1)[0] == "none"
    assert hccl.default_level1(8)[0] == "H-D_R"
    assert hccl.default_level1(6)[0] == "ring"
    assert hccl.default_level1(12)[0] == "NHR"
    small = hccl.choose("allreduce", 64 * KiB, Topology.from_cluster("atlas-800t-a2", accelerators=48))
    assert (small.level0, small.level1) == ("mesh", "ring")
    big = hccl.choose("allreduce", GiB, Topology.from_cluster("atlas-800t-a2", accelerators=48))
    assert big.level1 == "pipeline" and "large message" in big.rule
    one = hccl.estimate("allreduce", GiB, Topology.from_cluster("atlas-800t-a2", accelerators=8))
    peer = 28e9 * 0.85
    assert one.time == pytest.approx(2 * (2e-6 + 7 / 8 * GiB / (7 * peer)))   # mesh: all 7 peers at once


def test_flagcx_plan():
    t = Topology.from_cluster("hetero-h100-910b", accelerators=64)
    p = flagcx.plan("allreduce", 256 << 20, t)
    phases = [(s.phase, s.library, s.operation) for s in p.steps]
    assert phases == [(1, "nccl", "reduce_scatter"), (1, "hccl", "reduce_scatter"), (2, "p2p", "send/recv"),
                      (3, "nccl", "all_gather"), (3, "hccl", "all_gather")]
    cross = p.steps[2]
    assert cross.nbytes == (256 << 20) / 32
    assert cross.time == pytest.approx(20e-6 + (256 << 20) / 32 / (25e9 * 0.8))
    assert p.time == pytest.approx(max(s.time for s in p.steps if s.phase == 1) + cross.time +
                                   max(s.time for s in p.steps if s.phase == 3))
    assert all(t_alt > p.time for t_alt in p.alternatives.values())
    with pytest.raises(TopologyError, match="homogeneous"):
        flagcx.plan("allreduce", 1, Topology.from_cluster("dgx-h100", accelerators=16))
