"""Loop-IR counts against hand-computed numbers; the predictors' sanity: monotone in size, memory-bound kernels at
the bandwidth, compute-bound ones at the peak, the Ascend pipeline from the twin's counters."""
from __future__ import annotations

import math

import numpy as np
import pytest

import xbench as xb
from xbench.hw import get_target
from xbench.hw import predict as P
from xbench.hw import traces as T
from xbench.hw.cachesim import Hierarchy

f32 = np.float32


def counts(op, *args):
    p = op.lower(*args)
    return p, P.program_counts(p, P.program_data(p, op.arrays(*args)))


# ---- counts -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n,d", [(2, 3), (7, 64)])
def test_softmax_counts(n: int, d: int) -> None:
    _, (c,) = counts(xb.ops.softmax, np.zeros((n, d), f32))
    # per element: max, subtract, exp, sum, divide
    assert c.total_flops == 5 * n * d and c.transcendentals == n * d
    assert c.functions == {"reduce_max": n * d, "sub": n * d, "exp": n * d, "reduce_sum": n * d, "div": n * d}
    assert c.bytes_read == c.bytes_written == 4 * n * d
    # global accesses: two passes over the input, one store of the output; row scratch three times
    assert c.accesses == 3 * n * d and c.scratch_accesses == 3 * n * d


def test_layer_norm_counts_hoist_row_constants() -> None:
    n, d = 3, 8
    _, (c,) = counts(xb.ops.layer_norm, np.zeros((n, d), f32), (d,), np.ones(d, f32), np.ones(d, f32))
    # sum: d; variance: (x - mean) squared and summed, 3d, + mean*(1/d) once; output: 4d, + 4 per row
    assert c.total_flops == n * (8 * d + 5)
    assert c.reads == {"input": 4 * n * d, "weight": 4 * d, "bias": 4 * d} and c.writes == {"out": 4 * n * d}


@pytest.mark.parametrize("m,k,n", [(5, 3, 7), (64, 32, 16)])
def test_matmul_counts(m: int, k: int, n: int) -> None:
    _, (c,) = counts(xb.ops.matmul, np.zeros((m, k), f32), np.zeros((k, n), f32))
    assert c.flops == {("float32", "tensor"): 2 * m * n * k}
    assert c.contraction == (1, m, n, k)
    assert c.bytes == 4 * (m * k + k * n + m * n)
    assert c.arithmetic_intensity == pytest.approx(2 * m * n * k / c.bytes)


def test_conv_and_gather_footprints() -> None:
    _, (c,) = counts(xb.ops.conv2d, np.zeros((2, 3, 8, 8), f32), np.zeros((4, 3, 3, 3), f32))
    assert c.total_flops == 2 * 2 * 4 * 6 * 6 * 27
    assert c.reads == {"weight": 4 * 4 * 27, "input": 4 * 2 * 3 * 64} and c.writes == {"out": 4 * 2 * 4 * 36}
    # an embedding reads only the rows its indices name (two distinct rows of ten here)
    _, (e,) = counts(xb.ops.embedding, np.array([1, 1, 3]), np.zeros((10, 4), f32))
    assert e.reads == {"input": 24, "weight": 2 * 16} and e.writes == {"out": 3 * 16}
    # a 2x2 stride-2 pool reads every input element once
    _, (q,) = counts(xb.ops.max_pool2d, np.zeros((1, 2, 8, 8), f32), 2)
    assert q.reads == {"input": 4 * 128} and q.total_flops == 128
    # an embedding of no indices reads and writes nothing (and is priced, not refused)
    _, (z,) = counts(xb.ops.embedding, np.zeros(0, np.int64), np.zeros((10, 4), f32))
    assert z.total_flops == 0 and not any(z.reads.values()) and not any(z.writes.values())


@xb.tensor_op
def attention(q, k, v):
    s = xb.matmul(q, xb.swapaxes(k, -1, -2))
    e = xb.exp(s - s.max(axis=-1, keepdims=True))
    return xb.matmul(e / e.sum(axis=-1, keepdims=True), v)


def test_attention_counts_over_its_kernels() -> None:
    b, s, d = 2, 4, 8
    q = np.zeros((b, s, d), f32)
    _, cs = counts(attention, q, q, q)
    kinds = [c.kind for c in cs]
    assert kinds.count("contract") == 2 and "row" in kinds
    assert sum(c.flops.get(("float32", "tensor"), 0) for c in cs) == 2 * (2 * b * s * s * d)
    assert sum(c.functions.get("exp", 0) for c in cs) == b * s * s
    assert sum(c.functions.get("reduce_max", 0) + c.functions.get("reduce_sum", 0) for c in cs) == 2 * b * s * s
    # the normalisation divides each score once (fused into the second GEMM's operand or its own pass)
    assert sum(c.functions.get("div", 0) for c in cs) == b * s * s


# ---- predictions --------------------------------------------------------------------------------------------

def _predict(op, args, target, model=None, simulate=True):
    p = op.lower(*args)
    data = P.program_data(p, op.arrays(*args))
    cs = P.program_counts(p, data)
    caches = None
    if simulate and target.kind != "npu":
        lay = T.layout(p)
        if target.kind == "cpu":
            trs = [T.cpu_trace(p, k, target, lay=lay, data=data) for k in p.kernels]
            h = Hierarchy.from_target(target)
        else:
            trs = [T.gpu_trace(p, k, target, lay=lay, data=data) for k in p.kernels]
            h = Hierarchy.from_target(target, granularity="sector")
        caches = T.simulate_program(trs, h, budget=300_000, warm=target.kind == "cpu",
                                    flush=target.kind == "gpu")
    return P.predict_program(p, target, counts=cs, caches=caches, model=model)


@pytest.mark.parametrize("name", ["cpu", "h100", "a100", "ascend-910b"])
def test_predictions_grow_with_the_problem(name: str, cpu, model) -> None:
    t = cpu if name == "cpu" else get_target(name)
    times = [_predict(xb.ops.softmax, (np.zeros((n, 512), f32),), t, model).time_s for n in (64, 512, 4096, 16384)]
    gemm = [_predict(xb.ops.matmul, (np.zeros((n, n), f32), np.zeros((n, n), f32)), t, model, simulate=False).time_s
            for n in (64, 256, 1024, 4096)]
    for ts in (times, gemm):
        # never faster on more work; the largest at least 3x the smallest (small ones are launch-bound)
        assert all(a <= b * (1 + 1e-9) for a, b in zip(ts, ts[1:])), ts
        assert ts[-1] > 3 * ts[0], ts


def test_memory_bound_kernels_run_at_the_bandwidth(cpu, model) -> None:
    x = np.zeros((4096, 2048), f32)                # 32 MiB in, 32 MiB out
    h100 = get_target("h100")
    pr = _predict(xb.ops.gelu, (x,), h100)
    (k,) = pr.kernels
    assert k.bound == "dram"
    ideal = 2 * x.nbytes / h100.bandwidth("hbm")
    assert ideal <= pr.time_s <= 1.5 * ideal + 10e-6
    big = np.zeros((2048, 1024), f32)               # 8 MiB each way on a CPU with a 256 KiB last-level cache
    pc = _predict(xb.ops.relu, (big,), cpu, model)
    (kc,) = pc.kernels
    assert kc.bound == "dram"
    # x read, out write-allocated and written back: 3 bytes of traffic per byte of x at the memory bandwidth
    assert kc.terms["dram"] == pytest.approx(3 * big.nbytes / cpu.bandwidth("dram"), rel=0.05)
    asc = get_target("ascend-910b")
    pa = _predict(xb.ops.gelu, (x,), asc)
    assert pa.kernels[0].bound in ("hbm", "mte2", "mte3")
    assert pa.time_s >= 2 * x.nbytes / asc.bandwidth("hbm")


def test_compute_bound_kernels_run_at_the_peak(cpu, model) -> None:
    n = 2048
    a = np.zeros((n, n), f32)
    h100 = get_target("h100")
    pr = _predict(xb.ops.matmul, (a, a), h100, simulate=False)
    (k,) = pr.kernels
    assert k.bound == "core"
    simt = 2 * n ** 3 / (h100.peak_flops("float32", "vector") * P.ASSUMPTIONS["gpu_simt_gemm_efficiency"].value)
    assert pr.time_s == pytest.approx(simt, rel=0.05)
    pc = _predict(xb.ops.matmul, (a, a), cpu, model, simulate=False)
    assert pc.kernels[0].bound == "core"
    assert pc.kernels[0].terms["core"] == pytest.approx(2 * n ** 3 / model.blas_flops["float32"], rel=0.05)
    asc = get_target("ascend-910b")
    pa = _predict(xb.ops.matmul, (a, a), asc, simulate=False)
    assert pa.kernels[0].bound == "cube"
    fractals = (n // 16) * (n // 8) * (n // 16)        # float32 operands: 16x8x16 MACs per cycle
    assert pa.kernels[0].terms["cube"] == pytest.approx(fractals / 24 / asc.clock_hz, rel=0.05)


@pytest.mark.parametrize("dtype,k0", [(np.float32, 8), (np.float16, 16)])
def test_ascend_cube_prices_each_operand_type_at_its_own_rate(dtype, k0: int) -> None:
    """A [48, 40] x [40, 24] matmul on the 910B cube: M and N padded to 16, K to the fractal's depth (8 for float32,
    16 for float16): 3 x 2 x ceil(40 / k0) fractals, one per cycle, spread evenly over the 24 cube cores."""
    asc = get_target("ascend-910b")
    a, b = np.zeros((48, 40), dtype), np.zeros((40, 24), dtype)
    p = xb.ops.matmul.lower(a, b)
    (c,) = P.program_counts(p)
    fractals = 3 * 2 * math.ceil(40 / k0)          # float32: 30 (46,080 MACs / 2,048 = 22.5 before padding)
    assert P.ascend_counters(c, asc)["totals"]["cube_fractals"] == fractals
    k = P.predict_npu_kernel(c, asc)
    assert k.terms["cube"] == pytest.approx(fractals / 24 / asc.clock_hz)      # spread over the 24 cube cores
    name = np.dtype(dtype).name
    assert any(f"{name} operands, one 16x{k0}x16 fractal" in n for n in k.notes)


def test_gpu_occupancy_hides_latency() -> None:
    """Fewer resident warps (from ptxas registers) hide less memory latency: the same kernel predicts slower."""
    h100 = get_target("h100")
    p = xb.ops.gelu.lower(np.zeros((1 << 20,), f32))
    (c,) = P.program_counts(p)
    base = {"template": "point", "grid": [4096, 1, 1], "threads_per_block": 256}
    full = P.predict_gpu_kernel(c, h100, resources={**base, "blocks_per_sm": 8})
    low = P.predict_gpu_kernel(c, h100, resources={**base, "blocks_per_sm": 1})
    assert full.terms["hiding"] == 1.0 and low.terms["hiding"] < 1.0
    assert low.time_s > full.time_s


def test_ascend_counters_from_the_twin_match_the_loop_ir() -> None:
    """The twin moves exactly the softmax's compulsory bytes; the pipeline model reads its per-core counters."""
    x = np.random.default_rng(0).standard_normal((96, 512)).astype(f32)
    art = xb.ops.softmax.compile("ascend", x)
    runs = art.counters(x)["launches"]
    p = art.program
    (c,) = P.program_counts(p)
    res = {"launches": art.kernels[0].resources["launches"], "counters": runs}
    asc = get_target("ascend-910b")
    k = P.ascend_counters(c, asc, res)
    assert k["source"] == "twin"
    assert k["totals"]["mte2_bytes"] == c.bytes_read and k["totals"]["mte3_bytes"] == c.bytes_written
    ir = P.ascend_counters(c, asc, None)
    assert ir["source"] == "loop IR" and ir["totals"]["mte2_bytes"] == c.bytes_read
    pt = P.predict_npu_kernel(c, asc, res)
    blocks = runs[0]["block_dim"]
    per_core = max(pc["mte2_bytes"] for pc in runs[0]["per_core"])
    assert pt.terms["mte2"] >= per_core / asc.npu.rates["ddr_read_rate"] / asc.clock_hz * 0.999
    assert blocks <= asc.npu.vector_cores and pt.time_s > 0 and math.isfinite(pt.time_s)


def test_cpu_model_terms(cpu, model) -> None:
    """Small data: the kernel runs from L1/L2 and the overheads dominate; launching its parallel loop as tasks
    costs more than a serial call."""
    pr = _predict(xb.ops.softmax, (np.zeros((4, 64), f32),), cpu, model)
    (k,) = pr.kernels
    assert k.bound == "overhead" and pr.overhead_s == pytest.approx(2e-6)
    assert k.terms["dram"] == 0.0 and k.terms["overhead"] == pytest.approx(8e-6)     # model.task_us
    assert pr.time_s == pytest.approx(2e-6 + k.time_s)


Bt, Mt, Kt, Nt = xb.dims("Bt Mt Kt Nt")


@xb.tensor_op
def _scaled_products(x: xb.Tensor[Bt, Mt, Kt], w: xb.Tensor[Bt, Kt, Nt], s: xb.Tensor[Kt]):
    return xb.maximum((x * s) @ w, 0.0)


def test_a_contractions_packing_and_epilogue_launch_as_tasks_unless_a_batch_loop_holds_them(cpu, model) -> None:
    """A contraction's packing of x * s and its epilogue are two parallel loops around the GEMM: one batch point
    runs them as tasks (8 us each in the fixed model), several keep numba's parallel loops in a serial batch loop
    (1 us for the call and 4 more per region entered, two per batch point)."""
    def overhead(batches):
        p = _scaled_products.lower(np.zeros((batches, 64, 32), f32), np.zeros((batches, 32, 48), f32),
                                     np.zeros(32, f32))
        (k,) = p.kernels
        pr = P.predict_program(p, cpu, model=model, schedules={k.name: {"parallel": True, "impl": "blas"}})
        return pr.kernels[0].terms["overhead"]
    assert overhead(1) == pytest.approx(2 * 8e-6)
    assert overhead(3) == pytest.approx(1e-6 + 2 * 3 * 4e-6)


@pytest.mark.parametrize("dtype,rate", [(np.float32, {"a100": 156e12, "h100": 494.7e12, "ascend-910b": 176.95e12}),
                                        (np.float16, {"a100": 312e12, "ascend-910b": 353.89e12})])
def test_the_roofline_bound_runs_contractions_on_the_matrix_unit(dtype, rate) -> None:
    """A [1024, 1024] x [1024, 1024] matmul is compute-bound on every chip: 2 x 1024^3 flops at the matrix unit's
    listed peak for its operands, float32 as TF32 on the GPUs' tensor cores (which list no float32 rate) and at
    the cube's float32 rate on the 910B; a kernel launch on top of it."""
    a = np.zeros((1024, 1024), dtype)
    (c,) = P.program_counts(xb.ops.matmul.lower(a, a))
    for name, peak in rate.items():
        t = get_target(name)
        assert P.roofline_time(c, t) == pytest.approx(2 * 1024 ** 3 / peak, rel=1e-3)
        assert c.bytes / t.bandwidth("memory") < P.roofline_time(c, t)
    assert P.launch_time(get_target("a100")) == pytest.approx(3e-6)
    assert P.launch_time(get_target("ascend-910b")) == pytest.approx(5e-6)
