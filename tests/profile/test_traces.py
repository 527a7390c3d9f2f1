"""Access traces of loop-IR kernels against hand-computed address lists, and their simulated cache behaviour
against analytic expectations and pycachesim on the same trace."""
from __future__ import annotations

import numpy as np
import pytest
from cachesim import Cache

import xbench as xb
from xbench.hw import get_target
from xbench.hw import traces as T
from xbench.hw.cachesim import CacheLevel, Hierarchy, Trace, simulate
from xbench.hw.traces.points import _concat as concat


def addresses(trace: Trace) -> list[tuple[int, bool]]:
    return [(int(a), bool(w)) for a, w in zip(trace.addr, trace.write)]


# ---- layout and hand-computed cpu traces ---------------------------------------------------------------------

def test_layout_aligns_buffers_in_program_order() -> None:
    p = xb.ops.layer_norm.lower(np.zeros((3, 5), np.float32), (5,), np.ones(5, np.float32), np.ones(5, np.float32))
    lay = T.layout(p)
    assert list(lay.bases) == list(p.buffers)
    assert lay.bases == {"input": 0, "weight": 4096, "bias": 8192, "out": 12288}
    assert lay.end == 16384 and lay.scratch(1) == 16384 + lay.scratch_bytes


def test_softmax_trace_by_hand(cpu) -> None:
    """Per row: max loads, exp stored to row scratch, sum of the scratch, division stored to out."""
    p = xb.ops.softmax.lower(np.zeros((2, 3), np.float32))
    (t,) = T.cpu_trace(p, p.kernels[0], cpu, schedule={"parallel": False}).all()
    out, scratch = 4096, 8192          # input at 0 (24 B), out at the next page, scratch after the buffers
    want = []
    for i in range(2):
        row = 12 * i
        want += [(row + 4 * j, False) for j in range(3)]
        want += [x for j in range(3) for x in ((row + 4 * j, False), (scratch + 4 * j, True))]
        want += [(scratch + 4 * j, False) for j in range(3)]
        want += [x for j in range(3) for x in ((scratch + 4 * j, False), (out + row + 4 * j, True))]
    assert addresses(t) == want
    assert set(t.size.tolist()) == {4}


def test_parallel_split_gives_each_core_a_contiguous_chunk(cpu) -> None:
    p = xb.ops.softmax.lower(np.zeros((5, 3), np.float32))
    tr = T.cpu_trace(p, p.kernels[0], cpu, schedule={"parallel": True})
    a, b = tr.all()
    rows = lambda t: sorted({int(x) // 12 for x in t.addr[(t.addr < 4096) & (t.write == 0)]})  # noqa: E731
    assert rows(a) == [0, 1, 2] and rows(b) == [3, 4]
    # each core's row scratch is its own region
    assert {int(x) for x in a.addr[a.write == 1] if x >= 8192} == {tr.acc.lay.scratch(0) + 4 * j for j in range(3)}
    assert min(int(x) for x in b.addr if x >= 8192) == tr.acc.lay.scratch(1)
    # a window of steps is the matching slice of the whole trace
    U = tr.units
    whole = tr.all()[0]
    part = concat(tr.generate(0, 2 * U + 1)[:1] + tr.generate(2 * U + 1, tr.steps)[:1])
    assert addresses(part) == addresses(whole)


def test_transposed_read_strides_by_rows(cpu) -> None:
    op = xb.tensor_op(lambda x: x.T * 2.0, name="transpose2")
    p = op.lower(np.zeros((3, 4), np.float32))
    (t,) = T.cpu_trace(p, p.kernels[0], cpu, schedule={"parallel": False}).all()
    loads = [int(a) for a, w in zip(t.addr, t.write) if not w]
    assert loads == [4 * (i * 4 + j) for j in range(4) for i in range(3)]


def test_padding_reads_only_inside_the_image(cpu) -> None:
    """A 3x3 max pool with padding 1 over a 4x4 image: the untaken side of the padding select reads nothing."""
    x = np.zeros((1, 1, 4, 4), np.float32)
    p = xb.ops.max_pool2d.lower(x, 3, 1, 1)
    (t,) = T.cpu_trace(p, p.kernels[0], cpu, schedule={"parallel": False}).all()
    loads = t.addr[t.write == 0]
    inside = sum(len([1 for di in (-1, 0, 1) for dj in (-1, 0, 1) if 0 <= i + di < 4 and 0 <= j + dj < 4])
                 for i in range(4) for j in range(4))
    assert len(loads) == inside == 100
    assert loads.max() < 64 and int((t.write == 1).sum()) == 16


def test_gather_addresses_follow_the_indices(cpu) -> None:
    idx = np.array([3, 0, 3])
    w = np.zeros((5, 2), np.float32)
    p = xb.ops.embedding.lower(idx, w)
    data = {"input": idx, "weight": w}
    (t,) = T.cpu_trace(p, p.kernels[0], cpu, schedule={"parallel": False}, data=data).all()
    wbase = T.layout(p).bases["weight"]
    rows = [(int(a) - wbase) // 8 for a, wr in zip(t.addr, t.write) if not wr and a >= wbase and a < wbase + 40]
    assert rows == [3, 3, 0, 0, 3, 3]
    # without the index contents the addresses cannot be known
    with pytest.raises(T.TraceError, match="contents of input"):
        T.cpu_trace(p, p.kernels[0], cpu, schedule={"parallel": False}).all()


# ---- gpu traces ----------------------------------------------------------------------------------------------

def test_gpu_point_template_coalesces_warps_into_sectors() -> None:
    h100 = get_target("h100")
    op = xb.tensor_op(lambda x: x + 1.0, name="inc")
    p = op.lower(np.zeros(64, np.float32))
    tr = T.gpu_trace(p, p.kernels[0], h100)
    ts = tr.all()
    assert len(ts) == 132 and tr.steps == 1 and all(len(t) == 0 for t in ts[1:])
    assert addresses(ts[0]) == [(32 * s, False) for s in range(8)] + [(4096 + 32 * s, True) for s in range(8)]
    assert set(ts[0].size.tolist()) == {32}


def test_gpu_row_template_threads_stride_over_the_row() -> None:
    h100 = get_target("h100")
    x = np.zeros((2, 64), np.float32)
    p = xb.ops.softmax.lower(x)
    res = {"template": "row", "grid": [1, 1, 1], "threads_per_block": 64, "threads_per_point": 32,
           "points_per_block": 2, "row_scratch": {"tmp1_row": "shared"}}
    (t, *rest) = T.gpu_trace(p, p.kernels[0], h100, resources=res).all()
    first = [int(a) for a in t.addr[:16]]
    # max pass, step 0: warp 0 reads row 0 elements 0..31, warp 1 row 1 elements 0..31; then step 1
    assert first == [0, 32, 64, 96, 256, 288, 320, 352, 128, 160, 192, 224, 384, 416, 448, 480]
    # two passes of loads over the input (max, exp) and one of stores: the row scratch stays in shared memory
    assert len(t) == 3 * 2 * 64 * 4 // 32
    assert int(t.write.sum()) == 16 and t.addr[t.write == 1].min() == 4096


def test_gpu_tiled_gemm_loads_each_tile_once_per_block() -> None:
    h100 = get_target("h100")
    a, b = np.zeros((64, 32), np.float32), np.zeros((32, 64), np.float32)
    p = xb.ops.matmul.lower(a, b)
    res = {"template": "tiled", "grid": [2, 2, 1], "threads_per_block": 256, "BM": 32, "BN": 32, "BK": 16,
           "lhs_k_contiguous": True, "rhs_k_contiguous": False}
    ts = T.gpu_trace(p, p.kernels[0], h100, resources=res).all()
    busy = [t for t in ts if len(t)]
    assert len(busy) == 4                     # one block per SM
    lay = T.layout(p)
    for t in busy:
        loads = t.addr[t.write == 0]
        a_sectors = loads[loads < lay.bases["other"]]
        b_sectors = loads[(loads >= lay.bases["other"]) & (loads < lay.bases["out"])]
        assert len(a_sectors) == 32 * 32 * 4 // 32 and len(np.unique(a_sectors)) == len(a_sectors)
        assert len(b_sectors) == 32 * 32 * 4 // 32
        assert int((t.write == 1).sum()) == 32 * 32 * 4 // 32


# ---- cache behaviour --------------------------------------------------------------------------------------------

def _pycachesim(h: Hierarchy, t: Trace) -> list[Cache]:
    below, chain = None, []
    for lv in reversed(h.levels):
        below = Cache(lv.name, lv.sets, lv.ways, lv.line_bytes, "LRU", write_back=True, write_allocate=True,
                      load_from=below, store_to=below)
        chain.insert(0, below)
    cuts = np.flatnonzero(np.diff(t.size)) + 1          # pycachesim takes one access size per call
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(t)]):
        pairs = [(None, [a]) if w else ([a], None) for a, w in zip(t.addr[lo:hi].tolist(), t.write[lo:hi].tolist())]
        chain[0].loadstore(pairs, length=int(t.size[lo]))
    return chain


def _stream_add(n: int):
    op = xb.tensor_op(lambda x, y: x + y, name="stream_add")
    return op.lower(np.zeros(n, np.float32), np.zeros(n, np.float32))


def test_streaming_kernel_hit_rates_match_the_analytic_values(cpu) -> None:
    """z = x + y over 3 x 256 KiB: each 64-byte line gives 1 miss and 15 hits in L1; nothing is reused in L2
    or L3; memory reads x, y and z (write-allocate) once per run and writes z back once."""
    n = 1 << 16
    p = _stream_add(n)
    tr = T.cpu_trace(p, p.kernels[0], cpu, schedule={"parallel": False})
    h = Hierarchy.from_target(cpu)
    (kc,) = T.simulate_program([tr], h, budget=10 ** 7)
    assert kc.exact and kc.accesses == 3 * n
    assert kc.level("l1").hit_rate == pytest.approx(15 / 16)
    lines = 4 * n // 64
    for name in ("l2", "l3"):
        lv = kc.level(name)
        # every line comes from below: no load hits; the dirty z lines written back from above hit
        assert lv.load_hits == 0 and lv.load_misses == 3 * lines
        assert lv.store_hits + lv.store_misses == lines
        assert lv.hit_rate == pytest.approx(lines / (4 * lines))
    assert kc.dram_read_bytes == 3 * 4 * n
    assert kc.dram_write_bytes == 4 * n          # the second of two runs: steady state


def test_streaming_trace_counts_match_pycachesim(cpu) -> None:
    p = _stream_add(1 << 13)
    (t,) = T.cpu_trace(p, p.kernels[0], cpu, schedule={"parallel": False}).all()
    h = Hierarchy([CacheLevel("l1", 4096, 64, 4), CacheLevel("l2", 32768, 64, 8)])
    ours = simulate(h, t, lru_on_store_hit=False)
    py = _pycachesim(h, t)
    for lv, c in zip(ours.levels, py):
        assert lv.load_hits == c.backend.HIT_count
        assert lv.load_misses + lv.store_misses == c.backend.MISS_count
    assert ours.level("l1").hit_rate == pytest.approx(15 / 16)


def test_blocked_matmul_misses_only_compulsorily_when_it_fits(cpu) -> None:
    """The BLAS-blocked 48 x 48 x 48 GEMM (operands, packed panels and C: 48 KiB) fits the 256 KiB L3: its misses
    there are exactly the distinct lines the trace touches; L1/L2 counts agree with pycachesim."""
    a = np.zeros((48, 48), np.float32)
    p = xb.ops.matmul.lower(a, a)
    tr = T.cpu_trace(p, p.kernels[0], cpu, schedule={"parallel": False, "impl": "blas"})
    assert tr.granularity == "vector"
    streams = tr.all()
    t = streams[0] if len(streams) == 1 or not len(streams[1]) else Trace.concat(streams)
    h = Hierarchy.from_target(cpu)
    cold = simulate(h, t)
    distinct = len(np.unique(np.concatenate([np.arange(a_ >> 6, ((a_ + s - 1) >> 6) + 1)
                                             for a_, s in zip(t.addr.tolist(), t.size.tolist())])))
    assert cold.level("l3").misses == distinct
    assert cold.dram_read_bytes == 64 * distinct
    # every A element is read once from the operand and once per N panel from the packed copy
    assert cold.level("l1").hit_rate > 0.5
    small = Hierarchy([CacheLevel("l1", 4096, 64, 4), CacheLevel("l2", 32768, 64, 8)])
    ours = simulate(small, t, lru_on_store_hit=False)
    py = _pycachesim(small, t)
    for lv, c in zip(ours.levels, py):
        assert lv.load_hits == c.backend.HIT_count
        assert lv.load_misses + lv.store_misses == c.backend.MISS_count


def test_sampled_simulation_agrees_with_the_whole_trace(cpu) -> None:
    """A 512 x 1024 softmax on the small CPU: the windowed estimate is close to the whole simulation."""
    p = xb.ops.softmax.lower(np.zeros((512, 1024), np.float32))
    tr = T.cpu_trace(p, p.kernels[0], cpu)
    h = Hierarchy.from_target(cpu)
    (whole,) = T.simulate_program([tr], h, budget=10 ** 8, warm=False)
    (sampled,) = T.simulate_program([tr], h, budget=400_000, samples=6)
    assert whole.exact and not sampled.exact and sampled.simulated < whole.simulated / 3
    for name in ("l1", "l2"):
        w, s = whole.level(name), sampled.level(name)
        assert abs(s.hit_rate - w.hit_rate) <= max(0.02, 2 * s.hit_rate_ci), name
    assert sampled.dram_bytes == pytest.approx(whole.dram_bytes, rel=0.15)
    assert sampled.accesses == pytest.approx(whole.accesses, rel=0.01)


def test_trace_generation_speed(cpu) -> None:
    """Generating a softmax trace runs at millions of accesses per second (vectorised over index grids)."""
    import time
    p = xb.ops.softmax.lower(np.zeros((256, 1024), np.float32))
    tr = T.cpu_trace(p, p.kernels[0], cpu)
    tr.generate(0, 6)
    t0 = time.perf_counter()
    n = sum(len(t) for t in tr.all())
    rate = n / (time.perf_counter() - t0)
    assert n == 256 * 6 * 1024 and rate > 1e6


def test_footprint_prewarm_keeps_data_that_fits_the_last_level(cpu) -> None:
    """Repeated runs of a kernel whose data fits the 256 KiB L3: the whole warm simulation has no memory traffic;
    the sampled one matches it when its windows start from the program's footprint, not without."""
    p = xb.ops.rms_norm.lower(np.zeros((96, 256), np.float32), (256,), np.ones(256, np.float32))  # 2 x 96 KiB
    lay = T.layout(p)
    tr = T.cpu_trace(p, p.kernels[0], cpu, lay=lay)
    h = Hierarchy.from_target(cpu)
    foot = T.footprint_trace(p, lay)
    assert len(foot) == (96 * 256 * 4 * 2 + 256 * 4) // 64 and foot.write[-1] and not foot.write[0]
    (whole,) = T.simulate_program([tr], h, budget=10 ** 7)
    assert whole.exact and whole.dram_bytes == 0
    (warm,) = T.simulate_program([tr], h, budget=60_000, footprint=foot)
    (cold,) = T.simulate_program([tr], h, budget=60_000)
    assert not warm.exact and warm.dram_bytes == 0
    assert any("fits the last level" in n for n in warm.notes)
    assert cold.dram_bytes > 0.5 * 2 * 96 * 256 * 4


def test_sampling_weighs_a_gemm_and_its_epilogue_by_their_accesses(cpu) -> None:
    """Attention's last kernel is per batch point a BLAS GEMM (few steps, thousands of accesses each) then its
    epilogue (many steps of a few accesses): the sampled estimate matches the whole simulation, where sampling
    by steps extrapolated whichever phase a window happened to land in."""
    q = np.zeros((6, 96, 32), np.float32)
    p = xb.ops.scaled_dot_product_attention.lower(q, q, q)
    lay = T.layout(p)
    k = p.kernels[-1]
    tr = T.cpu_trace(p, k, cpu, lay=lay)
    dens = [a / n for n, a in tr.segments()]
    assert isinstance(tr, T.SequenceTrace) and max(dens) > 50 * min(dens)
    h = Hierarchy.from_target(cpu)
    (whole,) = T.simulate_program([tr], h, budget=10 ** 8, warm=False)
    assert tr.estimate_accesses() == pytest.approx(whole.accesses, rel=0.02)
    (sampled,) = T.simulate_program([tr], h, budget=int(whole.accesses) // 2, samples=6)
    assert not sampled.exact
    assert sampled.accesses == pytest.approx(whole.accesses, rel=0.02)
    assert sampled.access_bytes == pytest.approx(whole.access_bytes, rel=0.1)
    assert abs(sampled.level("l1").hit_rate - whole.level("l1").hit_rate) <= 0.05


def test_a_shifted_gemm_convolution_is_traced_as_the_backend_runs_it(cpu) -> None:
    """window = shift: the weights repacked once, then per image the padded buffer zeroed, every input element
    copied into it once, one GEMM per tap reading it at the tap's offset, and the epilogue over the outputs."""
    x, w = np.zeros((2, 4, 10, 10), np.float32), np.zeros((6, 4, 3, 3), np.float32)
    p = xb.ops.conv2d.lower(x, w, None, padding=1)
    k = p.kernels[-1]
    tr = T.cpu_trace(p, k, cpu, schedule={"window": "shift"})
    kinds = [ph.kernel.split(".")[-1] for ph in tr.phases]
    assert kinds == ["weights"] + (["zero", "pad"] + ["gemm"] * 9 + ["epilogue"]) * 2
    pad = tr.phases[2]
    assert sum(len(t) for t in pad.all()) == 2 * 4 * 10 * 10           # a load and a store per input element
    gemm = tr.phases[3:12]
    base = T.layout(p).end                                               # scratch is placed after the buffers
    starts = [int(min(t.addr.min() for t in g.all() if len(t) and (t.addr >= base).any())) for g in gemm]
    assert len(set(starts)) == 9
    assert "shifted GEMMs" in " ".join(tr.notes)
    packed = T.cpu_trace(p, k, cpu, schedule={"window": "pack"})
    assert "weights" not in [ph.kernel.split(".")[-1] for ph in packed.phases]


H, L, S, D = xb.dims("H L S D")


@xb.tensor_op
def normalised(p: xb.Tensor[H, L, S], total: xb.Tensor[H, L], v: xb.Tensor[H, S, D]):
    return (p / total.reshape(p.shape[0], p.shape[1], 1)) @ v


def test_a_factor_along_the_output_is_traced_after_the_gemm_as_the_backend_runs_it(cpu) -> None:
    """(p / row_sum) @ v: the backend reads p in place and divides the product's rows, so the trace has no
    packing pass, the GEMM, and an epilogue per batch point."""
    p, total, v = np.zeros((2, 16, 24), np.float32), np.ones((2, 16), np.float32), np.zeros((2, 24, 8), np.float32)
    prog = normalised.lower(p, total, v)
    (k,) = [k for k in prog.kernels if k.kind == "contract"]
    tr = T.cpu_trace(prog, k, cpu)
    assert [ph.kernel.split(".")[-1] for ph in tr.phases] == ["gemm", "epilogue"] * 2
    assert T.blas_regions(prog, k) == 2
