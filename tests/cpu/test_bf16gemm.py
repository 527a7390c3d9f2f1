"""The bfloat16 GEMM (vdpbf16ps micro-kernel, packing, blocking, threads) against float64 products of the same
bfloat16 values, over every operand layout and edge, and the contractions that take it; and its AMX twin."""
import ctypes
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import xbench as xb
from xbench.backends.cpu import amx
from xbench.backends.cpu import bf16gemm as G

# Each GEMM is tested where its instructions exist (elsewhere they would stop the process with an illegal
# instruction); what runs instead there, SGEMM on widened operands, is tested on every machine below.
needs_bf16 = pytest.mark.skipif(not G.available(), reason="this CPU has no AVX512-BF16: the vdpbf16ps GEMM cannot "
                                "run here, and bfloat16 contractions widen for SGEMM (tested here)")
needs_amx = pytest.mark.skipif(not amx.permitted(), reason="this CPU has no AMX-BF16, or Linux refused its tiles: "
                               "the AMX GEMM cannot run here, and the vdpbf16ps GEMM or SGEMM run instead (tested here)")
rng = np.random.default_rng(5)


def bits(shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(ml_dtypes.bfloat16).view(np.uint16)


def value(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def layouts(M, K, N):
    a, at = bits((M, K)), bits((K, M)).T
    b, bt = bits((K, N)), bits((N, K)).T
    return {"row x row": (a, b), "row x col": (a, bt), "col x row": (at, b), "col x col": (at, bt),
            "strided": (bits((M, 2 * K))[:, ::2], bits((K, N + 3))[:, 1:N + 1])}


# a whole tile, edge tiles in both directions, odd K, several KC blocks, more row blocks than threads, and a
# small output over a long sum (split over the threads: a weight gradient over tokens)
@needs_bf16
@pytest.mark.parametrize("M,K,N", [(G.MR, 2, G.NR), (37, 19, 53), (1, 1, 1), (130, 2 * G.KC * 2 + 3, 70),
                                   (4 * G.MC + 5, 64, 3 * G.NR + 17), (50, 8 * G.KC + 1, 50)])
def test_gemm_matches_float64_products_of_the_same_values(M, K, N):
    for name, (a, b) in layouts(M, K, N).items():
        want = value(a) @ value(b)
        out = np.full((M, N), np.nan, np.float32)
        G.gemm(a, b, out, 2)
        # sums of K products in float32: a few units in the last place of the largest partial sums
        tol = 4 * K * np.finfo(np.float32).eps * (np.abs(value(a)) @ np.abs(value(b)))
        assert (np.abs(out - want) <= tol + 1e-30).all(), name
        serial = np.full((M, N), np.nan, np.float32)
        G.gemm_serial(a, b, serial)
        if G._plan(M, N, (K + 1) // 2, 2)[3] == 1:
            np.testing.assert_array_equal(serial, out, err_msg=name)   # the same sums in the same order
        else:
            assert (np.abs(serial - want) <= tol + 1e-30).all(), name
        again = out.copy()
        G.gemm(a, b, again, 2, True)                                    # C += A @ B
        assert (np.abs(again - 2 * want) <= 2 * tol + 1e-30).all(), name


@needs_bf16
def test_a_strided_output_and_an_empty_contraction():
    a, b = bits((20, 30)), bits((30, 50))
    big = np.full((20, 120), np.nan, np.float32)
    G.gemm(a, b, big[:, 10:60], 2)
    np.testing.assert_allclose(big[:, 10:60], value(a) @ value(b), rtol=1e-5, atol=1e-4)
    assert np.isnan(big[:, :10]).all() and np.isnan(big[:, 60:]).all()          # nothing written outside
    out = np.full((4, 5), np.nan, np.float32)
    G.gemm(bits((4, 0)), bits((0, 5)), out, 2)
    assert (out == 0).all()


@needs_amx
@pytest.mark.parametrize("M,K,N", [(G.MR, 2, G.NR), (37, 19, 53), (1, 1, 1), (130, 515, 70), (197, 64, 209),
                                   (50, 2049, 50), (64, 64, 64)])
def test_the_amx_gemm_matches_float64_products_of_the_same_values(M, K, N):
    # edge blocks in both directions, K not a whole tile step, several KC blocks (2049 = 8 x 256 + 1), exact blocks
    for name, (a, b) in layouts(M, K, N).items():
        want = value(a) @ value(b)
        tol = 4 * K * np.finfo(np.float32).eps * (np.abs(value(a)) @ np.abs(value(b)))
        for add in (False, True):
            for serial in (False, True):
                start = rng.standard_normal((M, 2 * N)).astype(np.float32)
                out = np.array(start)[:, ::2]                                  # a strided output
                before = out.copy()
                if serial:
                    amx.gemm_serial(a, b, out, add)
                else:
                    amx.gemm(a, b, out, 2, add)
                expect = want + before if add else want
                assert (np.abs(out - expect) <= tol + 1e-6 * np.abs(before)).all(), (name, add, serial)


def _mkl_gemm(a, b, out, add, ops):
    """MKL's cblas_gemm_bf16bf16f32 through ctypes, with the (transpose, leading dimension) of each operand
    written out by the caller."""
    import torch
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"), mode=os.RTLD_NOLOAD)
    f, i, p = lib.cblas_gemm_bf16bf16f32, ctypes.c_int, ctypes.c_void_p
    f.argtypes = [i, i, i, i, i, i, ctypes.c_float, p, i, p, i, ctypes.c_float, p, i]
    (ta, lda), (tb, ldb) = ops
    M, K, N = a.shape[0], a.shape[1], b.shape[1]
    f(101, ta, tb, M, N, K, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, 1.0 if add else 0.0, out.ctypes.data,
      out.strides[0] // 4)


def check_symbols() -> str:
    """The kernels' GEMM symbols against the GEMM each layout runs on: MKL's (called here directly) for the layouts
    it takes where `link` chose it, the AMX or vdpbf16ps GEMM for the others; the same bits. Returns the route."""
    route = G.link(False)
    assert G.link(True) == route
    own = amx if amx.permitted() else G
    M, K, N = 37, 2 * G.KC + 19, 53
    cases = layouts(M, K, N)
    row, col = (111, K), (112, M)                  # A row-major (ld K), or the transpose of a row-major [K, M]
    ops = {"row x row": (row, (111, N)), "row x col": (row, (112, K)), "col x row": (col, (111, N)),
           "col x col": (col, (112, K)), "broadcast row": ((111, K), (111, N))}
    cases["broadcast row"] = (np.lib.stride_tricks.as_strided(bits(K), (1, K), (0, 2)), bits((K, N)))
    for name, (a, b) in cases.items():
        for strided_out in (True, False):
            for add in (False, True):
                m = a.shape[0]
                start = rng.standard_normal((m, 2 * N)).astype(np.float32)
                pick = (lambda x: np.array(x)[:, ::2]) if strided_out else (lambda x: np.ascontiguousarray(x[:, :N]))
                mkl = route == "mkl" and name in ops and not strided_out
                for serial in (False, True):
                    want, got = pick(start), pick(start)
                    if mkl:
                        _mkl_gemm(a, b, want, add, ops[name])
                    elif serial:
                        own.gemm_serial(a, b, want, add)
                    else:
                        own.gemm(a, b, want, 2, add)
                    if serial:
                        G.call_serial(a, b, got, add)
                    else:
                        G.call(a, b, got, 2, add)
                    assert np.array_equal(got, want), (name, strided_out, add, serial, route)
    return route


@needs_bf16
def test_kernels_call_the_gemm_by_symbol_with_the_same_bits():
    check_symbols()


@needs_bf16
@pytest.mark.parametrize("choice", ["", "mkl", "own"])
def test_with_torchs_mkl_the_symbols_run_its_bfloat16_gemm_for_the_layouts_it_takes(choice):
    """In a process that loads torch first, xbench's GEMMs run on torch's MKL (`blas`), and the bfloat16 symbols
    on MKL's bfloat16 GEMM where torch's MKL has one and runs it at bfloat16's rate (Intel's CPUs, or
    `XBENCH_BF16_GEMM=mkl`); elsewhere on xbench's own. `needs_bf16` as the others: the layouts MKL does not take
    run the vdpbf16ps or AMX GEMM, and without AVX512-BF16 kernels never call these symbols (bfloat16 contractions
    widen for SGEMM, tested on every machine)."""
    code = ("import sys, torch\n"
            "from tests.cpu import test_bf16gemm as t\n"
            "from xbench.backends.cpu import blas\n"
            "print(blas.PROVIDER, blas.MKL_BF16, t.check_symbols())\n")
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"), "XBENCH_BF16_GEMM": choice}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    provider, bf16, route = run.stdout.split()[-3:]
    import torch
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"), mode=os.RTLD_NOLOAD)
    has = torch.backends.mkl.is_available() and hasattr(lib, "cblas_gemm_bf16bf16f32")
    with open("/proc/cpuinfo") as f:
        intel = "GenuineIntel" in f.read()
    assert bf16 == str(has), run.stdout
    if has and (choice == "mkl" or (choice == "" and intel)):
        assert (provider, route) == ("mkl", "mkl"), run.stdout
    else:
        assert route in ("amx", "vdpbf16ps"), run.stdout


def _bf16(shape):
    return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)


@needs_bf16
@pytest.mark.parametrize("case", ["matmul", "transposed", "batched", "packed operand"])
def test_bfloat16_contractions_run_on_the_bf16_gemm_and_verify(case):
    if case == "matmul":
        op, args = xb.ops.matmul, (_bf16((70, 96)), _bf16((96, 130)))
    elif case == "transposed":
        op, args = xb.ops.linear, (_bf16((70, 96)), _bf16((130, 96)), _bf16(130))
    elif case == "batched":
        op, args = xb.ops.matmul, (_bf16((3, 40, 64)), _bf16((3, 64, 72)))
    else:
        op, args = xb.ops.matmul, (_bf16((40, 64)).T, _bf16((40, 72)))
    source = "\n".join(k.source for k in op.compile("cpu", *args).kernels)
    assert "_xb_gemm_bf16" in source and "_xb_dot(" not in source
    for r in xb.verify(op, *args, backend="cpu"):
        assert r.ok, f"{case}: {r.message}"


@pytest.mark.parametrize("case", ["matmul", "transposed"])
def test_without_avx512_bf16_bfloat16_contractions_widen_for_sgemm_and_verify(case, monkeypatch):
    """What a CPU without AVX512-BF16 runs (forced here, so every machine tests it): both operands widened to
    float32 and one SGEMM, within the same tolerance."""
    monkeypatch.setattr(G, "available", lambda: False)
    # shapes of their own: the process keeps what it compiled, and the test above compiled its shapes for the GEMM
    if case == "matmul":
        op, args = xb.ops.matmul, (_bf16((66, 90)), _bf16((90, 124)))
    else:
        op, args = xb.ops.linear, (_bf16((66, 90)), _bf16((124, 90)), _bf16(124))
    source = "\n".join(k.source for k in op.compile("cpu", *args).kernels)
    assert "_xb_gemm_bf16" not in source and "_xb_dot(" in source
    for r in xb.verify(op, *args, backend="cpu"):
        assert r.ok, f"{case}: {r.message}"


@xb.tensor_op
def relu_weight_grad(a: xb.Tensor["K", "M"], g: xb.Tensor["K", "M"], x: xb.Tensor["K", "N"]):
    return xb.einsum("km,kn->mn", xb.where(a <= 0, 0 * g, g), x)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_fused_operand_read_along_its_rows_is_packed_transposed(dtype):
    """A weight gradient's left operand (a ReLU's backward fused in) reads [tokens, features] along features, its
    rows: packed as [K, M] with M inner (contiguous reads and writes) and multiplied as its transpose. The right
    operand is read in place, except where bfloat16 widens for SGEMM (no AVX512-BF16): then it is packed too."""
    a, g, x = (rng.standard_normal((640, n)).astype(dtype) for n in (50, 50, 30))
    source = relu_weight_grad.compile("cpu", a, g, x).source
    right = "x" if dtype == np.float32 or G.available() else "_B"
    assert "_A = _xb_new((640, 50)" in source and f"(_A.T, {right}, " in source
    for r in xb.verify(relu_weight_grad, a, g, x, backend="cpu"):
        assert r.ok, r.message


@xb.tensor_op
def offset_linear(x: xb.Tensor["M", "K"], w: xb.Tensor["N", "K"]):
    return xb.einsum("mk,nk->mn", x, w + 2)      # (a scale, w * 2, would apply to the product instead)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_fused_right_operand_read_along_k_is_packed_transposed(dtype):
    """A linear layer's weight [N, K] cast or offset on the way in (autocast's bf16 copy of a float32 weight) reads
    along K: packed as [N, K], K inner, and multiplied as its transpose (column-wise it read each element a
    cache line apart)."""
    x, w = rng.standard_normal((70, 96)).astype(dtype), rng.standard_normal((40, 96)).astype(dtype)
    source = offset_linear.compile("cpu", x, w).source
    assert "_B = _xb_new((40, 96)" in source and "_B.T, " in source
    for r in xb.verify(offset_linear, x, w, backend="cpu"):
        assert r.ok, r.message


@xb.tensor_op
def softmax_grad_times_keys(p: xb.Tensor["B", "S", "T"], g: xb.Tensor["B", "S", "T"], s: xb.Tensor["B", "S"],
                            k: xb.Tensor["B", "S", "D"]):
    return xb.einsum("bst,bsd->btd", p * (g - s[:, :, None]), k)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_fused_operand_with_a_per_row_scalar_is_still_packed_along_its_reads(dtype):
    """Attention's key gradient: the softmax backward fused into the left operand reads [S, T] along T, its rows,
    and a row sum indexed by S alone, one value for the whole run: packed as [K, M], M inner, as without it
    (column-wise it read each element a cache line apart)."""
    p, g = (rng.standard_normal((3, 48, 40)).astype(dtype) for _ in range(2))
    s, k = rng.standard_normal((3, 48)).astype(dtype), rng.standard_normal((3, 48, 24)).astype(dtype)
    source = softmax_grad_times_keys.compile("cpu", p, g, s, k).source
    assert "_A = _xb_new((48, 40)" in source and "_A.T" in source
    for r in xb.verify(softmax_grad_times_keys, p, g, s, k, backend="cpu"):
        assert r.ok, r.message


@needs_bf16
def test_kernels_run_the_vdpbf16ps_gemm_where_amx_is_refused():
    """Where the CPU has AMX the kernels' GEMM symbols run the AMX GEMM; a CPU with AVX512-BF16 and no AMX (or a
    Linux that refuses the tiles) runs the vdpbf16ps GEMM behind the same symbols. Symbols are registered once per
    process, so a child process refuses AMX before any kernel loads (and keeps to OpenBLAS, whose process has no
    MKL bfloat16 GEMM in front of xbench's), and bfloat16 contractions verify there."""
    code = (
        "import ml_dtypes, numpy as np\n"
        "from xbench.backends.cpu import amx, bf16gemm\n"
        "amx.permitted = lambda: False\n"
        "import xbench as xb\n"
        "rng = np.random.default_rng(7)\n"
        "b16 = lambda s: rng.standard_normal(s).astype(ml_dtypes.bfloat16)\n"
        "for op, args in ((xb.ops.matmul, (b16((45, 70)), b16((70, 61)))),\n"
        "                 (xb.ops.matmul, (b16((3, 33, 40)), b16((3, 40, 29)))),\n"
        "                 (xb.ops.linear, (b16((52, 80)), b16((90, 80)), b16(90)))):\n"
        "    src = '\\n'.join(k.source for k in op.compile('cpu', *args).kernels)\n"
        "    assert '_xb_gemm_bf16' in src, src\n"
        "    for r in xb.verify(op, *args, backend='cpu'):\n"
        "        assert r.ok, r.message\n"
        "a = b16((37, 2 * bf16gemm.KC + 19)).view(np.uint16)\n"
        "b = b16((2 * bf16gemm.KC + 19, 53)).view(np.uint16)\n"
        "want, got = (np.zeros((37, 53), np.float32) for _ in range(2))\n"
        "bf16gemm.link(False)\n"
        "bf16gemm.link(True)\n"
        "bf16gemm.gemm(a, b, want, 2)\n"
        "bf16gemm.call(a, b, got, 2)\n"
        "assert np.array_equal(got, want)         # the symbol runs the vdpbf16ps GEMM: the same bits\n"
        "bf16gemm.gemm_serial(a, b, want)\n"
        "bf16gemm.call_serial(a, b, got)\n"
        "assert np.array_equal(got, want)\n"
        "print('vdpbf16ps ok')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                              "XBENCH_BLAS": "openblas"})
    assert run.returncode == 0 and "vdpbf16ps ok" in run.stdout, (run.stdout + run.stderr)[-3000:]
