"""Target data files: every number carries a source, derived numbers agree with their formulas, and the
loader's errors say what to write."""
from __future__ import annotations

import tomllib

import numpy as np
import pytest

from xbench.hw.target import TARGETS_DIR, TargetError, get_target, list_targets, load_target_file

FILES = ["a100", "ascend-910b", "h100", "h200"]


def test_list_targets() -> None:
    assert list_targets() == ["a100", "ascend-910b", "cpu-local", "h100", "h200"]


def _numbers(node, path=""):
    """Every number in a parsed TOML tree with its dotted path, and whether it sits in a sourced table."""
    if isinstance(node, dict):
        sourced = "value" in node and bool(str(node.get("source", "")).strip())
        for k, v in node.items():
            if k == "value" and sourced:
                continue
            yield from _numbers(v, f"{path}.{k}" if path else k)
        if "value" in node:
            yield path, sourced
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool) and path != "schema":
        yield path, False


@pytest.mark.parametrize("name", FILES)
def test_every_number_has_a_source(name: str) -> None:
    raw = tomllib.loads((TARGETS_DIR / f"{name}.toml").read_text())
    found = list(_numbers(raw))
    assert len(found) > 20
    assert [p for p, ok in found if not ok] == []
    t = get_target(name)
    assert all(src.strip() for src in t.sources.values())
    assert t.uncertain <= set(t.sources)


@pytest.mark.parametrize("name, dtype, unit, value", [
    ("h100", "float16", "tensor", 989.4e12),
    ("h100", "fp8", "tensor", 1978.9e12),
    ("h100", np.float32, None, 66.9e12),
    ("h200", "bf16", None, 989.4e12),
    ("a100", np.dtype("float64"), "tensor", 19.5e12),
    ("a100", "tf32", "tensor_core", 156e12),
    ("ascend-910b", "half", "cube", 353.89e12),
    ("ascend-910b", "float32", "vector", 11.06e12),
])
def test_peak_flops(name: str, dtype, unit, value: float) -> None:
    assert get_target(name).peak_flops(dtype, unit=unit) == pytest.approx(value)


def test_ridge_points_match_the_hardware_notes() -> None:
    # FP16/BF16 tensor peak over HBM bandwidth, as tabulated in the project's hardware notes
    for name, ridge in (("h100", 295), ("h200", 206), ("a100", 153), ("ascend-910b", 221)):
        assert get_target(name).ridge_point("bfloat16" if name != "ascend-910b" else "float16") == \
            pytest.approx(ridge, rel=0.01)


@pytest.mark.parametrize("name", ["h100", "h200", "a100"])
def test_gpu_numbers_agree_with_their_formulas(name: str) -> None:
    t = get_target(name)
    lanes = {"h100": 128, "h200": 128, "a100": 64}[name]
    assert t.peak_flops("float32", "vector") == pytest.approx(t.compute_units * lanes * 2 * t.clock_hz, rel=0.005)
    assert t.bandwidth("l1") == pytest.approx(128 * t.compute_units * t.clock_hz, rel=0.005)
    assert [m.name for m in t.memory_levels] == ["l1", "l2", "hbm"]
    assert t.level("dram") is t.level("hbm") and t.memory.name == "hbm"
    l1 = t.level("l1")
    assert (l1.scope, l1.instances, l1.line_bytes, l1.sector_bytes) == ("per_unit", t.compute_units, 128, 32)
    assert l1.size_bytes == t.gpu.l1_shared_combined_bytes
    assert t.gpu.max_warps_per_sm * t.gpu.warp_size == t.gpu.max_threads_per_sm
    assert t.is_uncertain("memory.l1.associativity") and not t.is_uncertain("peak.float16.tensor")


def test_ascend_numbers_agree_with_the_platform_config() -> None:
    t = get_target("ascend-910b")
    n = t.npu
    assert (n.ai_cores, n.cube_cores, n.vector_cores, n.cube_shape) == (24, 24, 48, (16, 16, 16))
    assert t.peak_flops("float16", "tensor") == pytest.approx(24 * 16 ** 3 * 2 * 1.8e9, rel=1e-4)
    assert t.peak_flops("int8", "tensor") == pytest.approx(2 * t.peak_flops("float16", "tensor"), rel=1e-4)
    assert t.peak_flops("float16", "vector") == pytest.approx(48 * 128 * 2 * 1.8e9, rel=1e-3)
    assert n.vector_bytes_per_cycle == n.vector_lanes_fp16 * 2
    for level, rate in (("l0a", "l1_to_l0_a_rate"), ("l0b", "l1_to_l0_b_rate"), ("l2", "l2_rate")):
        assert t.bandwidth(level) == pytest.approx(n.rates[rate] * n.ai_cores * t.clock_hz, rel=1e-3)
    for level, size in (("ub", n.ub_bytes), ("l1", n.l1_bytes), ("l0a", n.l0a_bytes), ("l0b", n.l0b_bytes),
                        ("l0c", n.l0c_bytes)):
        assert t.level(level).size_bytes == size
    assert t.level("ub").instances == 48 and t.level("l1").instances == 24
    assert [m.name for m in t.caches] == ["l2"]
    # the hardware notes call the FP16 peak and the HBM bandwidth uncertain
    assert t.is_uncertain("peak.float16.tensor") and t.is_uncertain("memory.hbm.bandwidth_bytes_per_s")
    assert "CANN platform ini" in t.source("npu.rates.ddr_rate")
    assert "?" in t.describe()


def test_unknown_names_are_explained() -> None:
    with pytest.raises(TargetError, match=r"did you mean 'h100'.*known targets: a100, ascend-910b"):
        get_target("h10")
    with pytest.raises(TargetError, match="float16/vector, float32/tensor, float32/vector"):
        get_target("ascend-910b").peak_flops("float64")
    with pytest.raises(TargetError, match="no peak rate for float16 on the vector unit"):
        get_target("h100").peak_flops("float16", "vector")
    with pytest.raises(TargetError, match="'vector'.*'tensor'"):
        get_target("h100").peak_flops("float16", "warp")
    with pytest.raises(TargetError, match="levels are: l1, l2, hbm"):
        get_target("h100").level("l3")
    with pytest.raises(TargetError, match="did you mean"):
        get_target("h100").source("peak.float16.tensr")


@pytest.mark.parametrize("text, message", [
    ('schema = 1\nname = "x"\nkind = "gpu"\n[clock]\nboost_hz = 1.0e9\n', r"clock.boost_hz = 1000000000.0 has no source"),
    ('schema = 1\nname = "x"\nkind = "gpu"\n[clock]\nboost_hz = { value = 1.0e9 }\n', "has a value but no source"),
    ('schema = 1\nname = "x"\nkind = "gpu"\nwidth = 3\n', "unknown top-level keys"),
    ('schema = 1\nname = "y"\nkind = "cpu"\n', "name = 'y' but the file is x.toml"),
])
def test_loader_refuses_unsourced_or_malformed_files(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "x.toml"
    path.write_text(text)
    with pytest.raises(TargetError, match=message):
        load_target_file(path)
