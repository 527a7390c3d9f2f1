"""Cluster-scale predictions: the models file is sourced, a step decomposes as the docstring says, the table
and the claims come out of the model, and `python -m xbench dist predict` prints them."""
from __future__ import annotations

import tomllib

import pytest

from xbench.dist import cost, predict
from xbench.dist.predict import MFU, get_model, models, predict_step
from xbench.dist.topology import Topology
from xbench.hw.target import get_target

from .test_topology import _numbers


def test_twelve_sourced_models():
    assert len(models()) == 12
    raw = tomllib.loads(predict.MODELS_FILE.read_text())
    found = list(_numbers(raw))
    assert all(ok for _, ok in found), [p for p, ok in found if not ok]
    assert get_model("bert_base").dense_params == 110_000_000
    with pytest.raises(Exception, match="did you mean 'gpt2'"):
        get_model("gpt3")


def test_a_step_by_hand():
    topo = Topology.from_cluster("dgx-h100", accelerators=8)
    m = get_model("bert_base")
    s = predict_step(m, topo, overlap_comm=False)
    forward = m.forward_flops * m.batch / (get_target("h100").peak_flops("bfloat16", "tensor") * MFU["transformer"])
    assert s.forward_s == pytest.approx(forward) and s.compute_s == pytest.approx(3 * forward)
    assert s.step_s == pytest.approx(3 * forward + s.comm_s)
    assert s.exposed_s == pytest.approx(s.comm_s)
    # 440 MB of float32 gradients as 48 tensors of 9.17 MB: the first bucket (1 MiB cap) takes one, then a
    # 25 MiB bucket closes every 3 tensors: 1 + 15 + a last one of 2 tensors
    assert s.buckets == 17
    ovl = predict_step(m, topo)
    assert ovl.step_s < s.step_s and 0 < ovl.hidden_fraction <= 1
    assert ovl.busbw == pytest.approx(4 * m.dense_params * 1.75 / ovl.comm_s)
    int4 = predict_step(m, topo, scheme="int4")
    assert int4.comm_s < ovl.comm_s and int4.codec_s > 0


def test_recommendation_models_pay_all_to_all():
    topo = Topology.from_cluster("dgx-a100", accelerators=64)
    s = predict_step("dlrm", topo)
    m = get_model("dlrm")
    assert s.a2a_s == pytest.approx(2 * cost.choose("all_to_all", m.a2a_bytes_per_sample * m.batch, topo).time)
    assert predict_step("resnet50", topo).a2a_s == 0.0


def test_table_and_heterogeneous_rows():
    rows = predict.table(["resnet50", "gpt2"], ["dgx-a100", "hetero-h100-910b"], (8, 128))
    assert len(rows) == 8
    for r in rows:
        assert r["step_s"] >= r["compute_s"] > 0 and 0 <= r["hidden"] <= 1 and 0 < r["efficiency"] <= 1
        assert r["no_overlap_step_s"] >= r["step_s"] - 1e-12
    assert all(r["flat_step_s"] is None for r in rows if r["cluster"] == "hetero-h100-910b")


def test_numa_unaware_routing_is_slower():
    t = Topology.from_cluster("dgx-a100", accelerators=128)
    slow = predict.numa_unaware(t)
    assert slow.spec.inter.achievable == pytest.approx(min(23e9, 72e9 * 0.7 / 4))
    assert cost.choose("allreduce", 1 << 28, slow).time > cost.choose("allreduce", 1 << 28, t).time


def test_claims_are_computed():
    rows = predict.claims()
    assert {r["claim"] for r in rows} == {
        "3.2x more communication efficiency (topology-aware vs flat), 128 GPUs",
        "98 % of theoretical bandwidth on 128 GPUs", "22 % from NUMA-aware routing",
        "75 % less bandwidth with 4-bit gradients at 10,000 cards"}
    four_bit = [r for r in rows if r["claim"].startswith("75 %")]
    assert four_bit[0]["predicted"] == "86.5% less" and four_bit[1]["predicted"] == "630x more"


def test_cli_predict(capsys):
    from xbench.__main__ import main

    assert main(["dist", "predict", "--clusters", "atlas-800t-a2", "--accelerators", "16",
                 "--models", "bert_base"]) == 0
    out = capsys.readouterr().out
    assert "atlas-800t-a2" in out and "bert_base" in out and "loses from" in out and "verdict" in out
