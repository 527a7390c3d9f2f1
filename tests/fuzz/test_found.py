"""Bugs the fuzzer found, each as the minimal operator it shrank to, with the values every backend must give
(PyTorch's answers; hand-computed where they are special values)."""
import numpy as np
import pytest

import xbench as xb
from xbench import Tensor

BACKENDS = ["reference", "cpu", "cuda", "ascend"]
NAN, INF = np.nan, np.inf


def run(op, *arrays, backend):
    opts = {"ptx": False} if backend == "cuda" else {}
    outs = op.compile(backend, *arrays, **opts).run(*arrays)
    return outs


def same(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and bool(np.all((got == want) | (np.isnan(got) & np.isnan(want))
                                                   if got.dtype.kind == "f" else got == want))


@xb.tensor_op
def finite_mask(x: Tensor, s: Tensor, t: Tensor):
    return xb.isfinite(x + 1), s.sum() - s.sum(), t / t.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_fast_math_never_changes_special_values(backend):
    """cpu: with nsz and reassoc LLVM cancelled (x + 1) - (x + 1), so isfinite(x + 1) was True for NaN and inf and
    `s - s` was 0 for an infinite sum; with arcp `t / s` became t * (1 / s), inf for a subnormal sum."""
    x = np.array([NAN, INF, -INF, 1.0, 3e38], np.float32)
    s = np.array([INF, 1.0], np.float32)
    t = np.array([1e-39, 1e-39, 2e-39], np.float32)
    mask, zero, frac = run(finite_mask, x, s, t, backend=backend)
    assert mask.tolist() == [False, False, False, True, True]
    assert np.isnan(zero)
    np.testing.assert_allclose(frac, [0.25, 0.25, 0.5], rtol=1e-5)


@xb.tensor_op
def cumulative_bools(x: Tensor):
    return xb.cummax(x, axis=0), xb.cummin(x, axis=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cummax_and_cummin_of_bools(backend):
    """cpu and ascend asked numpy for the integer limits of bool (ValueError: Invalid integer data type 'b')."""
    x = np.array([[False, True, False], [False, False, True]])
    hi, lo = run(cumulative_bools, x, backend=backend)
    assert hi.tolist() == [[False, True, False], [False, True, True]]
    assert lo.tolist() == [[False, False, False], [False, False, False]]


@xb.tensor_op
def empty_pieces(x: Tensor, y: Tensor):
    return xb.concat([x, x * 2], axis=1), xb.concat([y[:, :0], y[:, 3:]], axis=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_concat_of_empty_pieces(backend):
    """Lowering a concat whose pieces are all empty along the axis took the last of no pieces (IndexError)."""
    x = np.zeros((3, 0), np.int32)
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    a, b = run(empty_pieces, x, y, backend=backend)
    assert a.shape == (3, 0) and b.shape == (2, 0)


@xb.tensor_op
def wrapped_scalars(b: Tensor):
    return xb.fmin(b, -2147483648), b + 300, b > 300, b * (2 ** 40 + 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_ints_wrap_into_the_tensors_dtype(backend):
    """A Python int beyond uint8 raised OverflowError in the cpu and cuda code generators; as PyTorch, it takes
    the tensor's dtype, wrapping (300 is 44 in uint8, -2**31 is 0, 2**40 + 3 is 3)."""
    b = np.array([3, 100, 250], np.uint8)
    lo, plus, gt, times = run(wrapped_scalars, b, backend=backend)
    assert lo.tolist() == [0, 0, 0]
    assert plus.tolist() == [47, 144, 38]
    assert gt.tolist() == [False, True, True]
    assert times.tolist() == [9, 44, 238]


def test_shifts_with_a_python_int_on_the_left():
    """`3 << a` raised a raw TypeError while tracing (Tensor had no __rlshift__ / __rrshift__)."""
    @xb.tensor_op
    def shifts(a: Tensor):
        return 3 << a, 256 >> a

    a = np.array([0, 1, 4, 7], np.int32)
    left, right = shifts.run(a, backend="cpu")
    assert left.tolist() == [3, 6, 48, 384] and right.tolist() == [256, 128, 16, 2]


def test_padding_an_empty_axis_by_edge_is_refused_with_a_reason():
    """np.pad raised inside the reference; the language now says why, at the user's line."""
    @xb.tensor_op
    def edge(a: Tensor):
        return xb.pad(a, ((0, 0), (1, 2)), mode="edge")

    with pytest.raises(xb.XbenchError, match="empty axis"):
        edge.trace(np.zeros((2, 0), np.float32))


@xb.tensor_op
def empty_sorts(x: Tensor):
    return xb.argsort(x, axis=-1, descending=True), xb.sort(x, axis=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sorting_an_empty_row(backend):
    """ascend: the sort of an empty row used a sort buffer it had not declared (g++ failed)."""
    order, values = run(empty_sorts, np.zeros((0,), np.float32), backend=backend)
    assert order.shape == (0,) and order.dtype == np.int64 and values.shape == (0,)


@xb.tensor_op
def empty_sums(a: Tensor, c: Tensor):
    return a.sum(axis=0, keepdims=True) @ c, a.prod(axis=1), a.any(axis=1), a.T @ a


@pytest.mark.parametrize("backend", BACKENDS)
def test_contractions_and_reductions_over_nothing(backend):
    """A contraction over an empty axis read element 0 of an empty buffer on cuda and divided by zero in the
    ascend tiling (SIGFPE); over no terms a sum is 0, a product 1, any False."""
    a = np.zeros((13, 0), np.float32)
    c = np.zeros((0,), np.float32)
    dot, prod, anyv, gram = run(empty_sums, a, c, backend=backend)
    assert dot.tolist() == [0.0] and prod.tolist() == [1.0] * 13 and anyv.tolist() == [False] * 13
    assert gram.shape == (0, 0)


@xb.tensor_op
def int64_edges(a: Tensor):
    return a + np.array(-2 ** 63, np.int64), xb.pad(a, ((1, 0), (0, 1)), value=2 ** 31 + 5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int64_wraps_and_pad_values_take_the_dtype(backend):
    """cpu: numba's int64 `+` is `add nsw`, and LLVM made `x + INT64_MIN` into `x | INT64_MIN` (-3 stayed -3);
    a pad value beyond int32 raised OverflowError in the code generators (it wraps, as PyTorch's scalars)."""
    a = np.array([[-3, 5]], np.int64)
    plus, padded = run(int64_edges, a, backend=backend)
    assert plus.tolist() == [[2 ** 63 - 3, -2 ** 63 + 5]]
    assert padded.tolist() == [[2 ** 31 + 5] * 3, [-3, 5, 2 ** 31 + 5]]
    a32 = a.astype(np.int32)
    assert run(int64_edges, a32, backend=backend)[1].tolist() == [[-2 ** 31 + 5] * 3, [-3, 5, -2 ** 31 + 5]]


def test_padding_an_integer_tensor_with_infinity_is_refused():
    @xb.tensor_op
    def pad_inf(a: Tensor):
        return xb.pad(a, 1, value=-float("inf"))

    with pytest.raises(xb.XbenchError, match="cannot pad a int32 tensor"):
        pad_inf.trace(np.zeros(3, np.int32))


@xb.tensor_op
def erf_of_erfinv(a: Tensor):
    return xb.erf(xb.erfinv(a))


@pytest.mark.parametrize("backend", BACKENDS)
def test_erf_of_erfinv(backend):
    """cpu: erfinv (computed in float64) fed a float64 into erf's float32 form, which numba could not type."""
    a = np.array([-1.5, -0.999, 0.3, 0.0], np.float32)
    out = run(erf_of_erfinv, a, backend=backend)[0]
    assert np.isnan(out[0]) and np.allclose(out[1:], [-0.999, 0.3, 0.0], atol=2e-6)


@xb.tensor_op
def first_argmax(a: Tensor):
    return a + a.argmax(), a.argmin(axis=-1), a.argmax(axis=-2)


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_argmax_of_ties_is_the_first(backend, dtype):
    """cuda: an int64 argmax combined its threads' values and positions in one shared array (_red_int64): all
    zeros gave 17 of 18."""
    a = np.zeros((1, 1, 9, 2), dtype)
    a[0, 0, 4] = [3, -3]
    total, lo, hi = run(first_argmax, a, backend=backend)
    assert total.tolist() == (a + 8).tolist() and lo.reshape(-1).tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 0]
    assert hi.tolist() == [[[4, 0]]]


@xb.tensor_op
def products(x: Tensor):
    return xb.cumprod(x, axis=-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_product_scan_keeps_its_zero(backend):
    """cuda: the tree-ordered product scan multiplied the leading 0 by a partial product of later elements that
    had overflowed (NaN where 0 * finite is 0). A scan is in order, as PyTorch's; a product *reduction* of such
    terms has no one answer (PyTorch's own is NaN or 0 by where the 0 sits), and the fuzzer does not judge it."""
    x = np.full((2, 65), 30.0, np.float32)
    x[:, 0] = 0.0
    (scan,) = run(products, x, backend=backend)
    assert np.all(scan == 0)
    if backend == "cuda":          # the tree scan template (several threads per row) compiles for the GPU too
        products.compile("cuda", x)


@xb.tensor_op
def idioms(n: Tensor, a: Tensor, b: Tensor, x: Tensor, y: Tensor, z: Tensor):
    v = x * y + z
    return 2.5 ** n, a / xb.sqrt(b), v - v.max(axis=-1, keepdims=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_idioms_the_issue_names(backend):
    """`2.5 ** int_tensor` (crashed), the rms-norm `a / sqrt(b)` at b = inf and 0 (NaN on cpu under fast math),
    and `v - v.max()` for a v the reduction and its epilogue both compute (positive on cpu when one fused
    x * y + z into an FMA and the other did not)."""
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal((8, 333) if backend != "cuda" else (4, 33)).astype(np.float32) for _ in range(3))
    n = np.array([-2, 0, 3, 1], np.int32)
    a, b = np.array([1.0, 2.0, -3.0], np.float32), np.array([np.inf, 0.0, 4.0], np.float32)
    power, ratio, centred = run(idioms, n, a, b, x, y, z, backend=backend)
    np.testing.assert_allclose(power, [0.16, 1.0, 15.625, 2.5], rtol=1e-6)
    assert ratio.tolist() == [0.0, np.inf, -1.5]
    assert centred.max() == 0.0 and (centred.max(axis=-1) == 0).all()


@xb.tensor_op
def int_division(p: Tensor, q: Tensor):
    return p // q, p % q


@pytest.mark.parametrize("backend", ["cpu", "ascend"])
def test_integer_division_of_negative_operands_past_the_parallel_threshold(backend):
    """140 000 elements (the cpu backend's parallel path): floor division and remainder as numpy's (with 0 for
    a zero divisor)."""
    rng = np.random.default_rng(1)
    p = rng.integers(-1000, 1000, 140_000)
    q = rng.integers(-9, 9, 140_000)
    quot, rem = run(int_division, p, q, backend=backend)
    safe = np.where(q == 0, 1, q)
    np.testing.assert_array_equal(quot, np.where(q == 0, 0, p // safe))
    np.testing.assert_array_equal(rem, np.where(q == 0, 0, p % safe))


@xb.tensor_op
def long_dot(b: Tensor, w: Tensor):
    return xb.tensordot(b, w, axes=2)


@pytest.mark.parametrize("backend", ["reference", "cpu", "ascend"])   # the CUDA simulator: minutes for this K
def test_a_contraction_over_more_than_65535_terms(backend):
    """ascend: a Cube matmul with K = 131072 broke the TCubeTiling rule (rows of an ND operand past 65535
    elements need MatmulConfig::intrinsicsCheck)."""
    rng = np.random.default_rng(2)
    b = rng.uniform(-1, 1, (1, 131072)).astype(np.float32)
    w = rng.uniform(-1, 1, (1, 131072)).astype(np.float32)
    (got,) = run(long_dot, b, w, backend=backend)
    np.testing.assert_allclose(got, np.dot(b[0].astype(np.float64), w[0]), rtol=1e-4)


@xb.tensor_op
def gather_then_pad(a: Tensor, b: Tensor):
    return xb.pad(xb.take(a, b, axis=0), ((0, 1), (0, 0), (0, 2)), value=3.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gathered_window_under_padding(backend):
    """ascend: the window copy of `take(a, b)` read the index b at the padded rows too (past b's one element)."""
    a = np.array([[7]], np.int32)
    b = np.array([[-1]], np.int64)
    (got,) = run(gather_then_pad, a, b, backend=backend)
    assert got.tolist() == [[[7, 3, 3]], [[3, 3, 3]]]


@xb.tensor_op
def to_the_infinity(x: Tensor):
    return x ** float("inf"), x ** -float("inf"), x ** float("nan")


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_infinite_exponent(backend):
    """ascend: a constant exponent of inf went through int(k) in the code generator (OverflowError)."""
    x = np.array([0, 1, 2], np.uint8)
    up, down, nan = run(to_the_infinity, x, backend=backend)
    assert up.tolist() == [0.0, 1.0, np.inf] and down.tolist() == [np.inf, 1.0, 0.0]
    assert nan[1] == 1.0 and np.isnan(nan[[0, 2]]).all()


def test_argmax_of_an_empty_tensor_is_refused_with_a_reason():
    """argmax with axis=None of a (5, 0) tensor reached numpy's argmax in the reference (ValueError); as PyTorch
    it is an error of the operator, at the user's line."""
    @xb.tensor_op
    def first(b: Tensor):
        return b + b.argmax()

    with pytest.raises(xb.XbenchError, match="argmax of an empty tensor"):
        first.trace(np.zeros((5, 0), np.float32))


@xb.tensor_op
def small_and_huge(x: Tensor, b: Tensor):
    return xb.rsqrt(xb.erf(x)), xb.asinh(x), xb.atanh(x), xb.tan(b), xb.expm1(x), xb.sign(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_math_near_zero_and_tangents_of_huge_arguments(backend):
    """ascend: erf near 0 had A&S 7.1.26's absolute error (1e-5 relative at 0.01, and rsqrt amplified it),
    asinh(-0.0061) lost 1 + x's rounding, tan(3.5e25) near a pole lost the reduced angle's low bits (q pi/2 + r
    was rounded to float32 before the polynomial)."""
    x = np.array([0.01, -0.0061234463937580585, 3e-5, 0.3, -0.45], np.float32)
    b = np.array([-3.4658360731611975e+25, 1e22, 7.0e15, 123456.7, -3e38], np.float32)
    outs = run(small_and_huge, x, b, backend=backend)
    X, B = x.astype(np.float64), b.astype(np.float64)
    from scipy.special import erf
    with np.errstate(invalid="ignore"):
        want = [1 / np.sqrt(erf(X)), np.arcsinh(X), np.arctanh(X), np.tan(B), np.expm1(X), np.sign(X)]
    for got, w in zip(outs, want):
        np.testing.assert_allclose(got, w, rtol=2.6e-6)          # the tolerance table's, float32 elementwise


@xb.tensor_op
def narrow_chains(a: Tensor, b: Tensor):
    return ((a + b) > 0, (a * b) // 3, (a - b).astype(xb.float32), -a > 0, abs(a) > 0, (a << 4) >> 4,
            xb.expm1((a * b).astype(xb.float32)))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_narrow_integers_wrap_at_every_operation(backend, dtype):
    """cpu (and the reference) computed int8 in 64 bits inside a fused kernel, wrapping only at the store: an
    int8 product of 79 * 3 shifted left by 3 reached expm1 as -1896 instead of PyTorch's 104. Every result of
    a narrow integer operation wraps to its type before anything reads it."""
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, 100, -77 if info.min else 7, 3], dtype)
    b = np.array([info.max, info.min if info.min else 200, 100, 55, 2], dtype)
    outs = run(narrow_chains, a, b, backend=backend)
    with np.errstate(over="ignore"):
        ab = (a * b).astype(dtype)
        sub = (a - b).astype(dtype)
        neg = (-a).astype(dtype)
        want = [(a + b).astype(dtype) > 0, (ab // np.array(3, dtype)).astype(dtype), sub.astype(np.float32),
                neg > 0, np.abs(a).astype(dtype) > 0, ((a << 4).astype(dtype) >> 4).astype(dtype),
                np.expm1(ab.astype(np.float32))]
    for i, (got, w) in enumerate(zip(outs, want)):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(w, np.float64), rtol=1e-6,
                                   err_msg=f"output {i}")


@xb.tensor_op
def big_powers(a: Tensor, b: Tensor):
    return xb.power(b, a), xb.clip(xb.power(b, a), None, 1.0)


def _wrapped_power(x: int, e: int, bits: int) -> int:
    if e < 0:
        return 1 if x == 1 else (1 if e % 2 == 0 else -1) if x == -1 else 0
    r = pow(x, e, 2 ** bits)
    return r - 2 ** bits if r >= 2 ** (bits - 1) else r


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_powers_past_an_exponent_of_65536(backend, dtype):
    """cpu: numba's integer `**` goes through a float pow past an exponent of 65536 (int32 powers came out 0,
    int64 ones INT64_MIN); cuda's helper had the same `**` (a float pow and a float-to-int conversion in its PTX;
    the simulator runs Python's). Integer powers wrap, as PyTorch's: (-1222763077) ** 1120445987 is -1342708413
    in int32."""
    a = np.array([[1120445987], [65537], [70001], [0], [-1], [5]], dtype)
    b = np.array([[0, -1222763077, 3, -3, 1, -1, 2, 7]], dtype)
    power, clipped = run(big_powers, a, b, backend=backend)
    bits = np.iinfo(dtype).bits
    want = np.array([[_wrapped_power(int(x), int(e), bits) for x in b[0]] for e in a[:, 0]], dtype)
    assert power.tolist() == want.tolist()
    np.testing.assert_allclose(clipped, np.minimum(want.astype(np.float64), 1.0), rtol=1e-6)


@xb.tensor_op
def rms_of_a_mask(a: Tensor):
    t = xb.where(abs(a).reshape((2, 5)) < 2, 0, -746)
    return t * xb.rsqrt((t * t).mean(axis=-1, keepdims=True) + 1e-6), -a > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_abs_and_negation_of_int64_min(backend):
    """ascend: abs and negation of an int64 were C++'s `-x`, undefined at INT64_MIN; g++ took
    `abs(INT64_MIN) < 2` as false inside an rms-norm's row (PyTorch's abs wraps: abs(INT64_MIN) is INT64_MIN)."""
    lo = -2 ** 63
    a = np.array([lo, 5, 7, 9, 11, 3, lo + 1, 1, -1, 2 ** 63 - 1], np.int64)
    normed, positive = run(rms_of_a_mask, a, backend=backend)
    k, k3 = 1 / np.sqrt(0.8), 1 / np.sqrt(0.6)           # the root mean square of 4 and of 3 terms of 746
    np.testing.assert_allclose(normed, [[0, -k, -k, -k, -k], [-k3, -k3, 0, 0, -k3]], rtol=1e-5)
    assert positive.tolist() == [False, False, False, False, False, False, True, False, True, False]


@xb.tensor_op
def empty_products(x: Tensor, w: Tensor, y: Tensor, z: Tensor, p: Tensor, q: Tensor):
    return x @ w, y @ z, p @ q


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmuls_with_no_rows_or_columns(backend):
    """ascend: the host tiling of a Cube matmul with M = 0 divided by a single-core M of 0 (SIGFPE, the process
    died), and the Cube takes no tiling with an empty M or N: such a kernel now computes nothing."""
    x, w = np.zeros((0, 1), np.float16), np.arange(8, dtype=np.float16).reshape(1, 8)
    y, z = np.ones((3, 1), np.float32), np.zeros((1, 0), np.float32)
    p, q = np.zeros((0, 2, 3), np.float32), np.zeros((0, 3, 4), np.float32)
    rows, cols, batch = run(empty_products, x, w, y, z, p, q, backend=backend)
    assert rows.shape == (0, 8) and rows.dtype == np.float16
    assert cols.shape == (3, 0) and batch.shape == (0, 2, 4)



@xb.tensor_op
def masks_as_integers(a: Tensor, b: Tensor, c: Tensor, d: Tensor):
    return (a != b).astype(xb.int32), (a < b).astype(xb.uint8), xb.cast(xb.take(c != d, d, axis=0), "int32")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_comparison_cast_to_an_integer(backend):
    """ascend: a float comparison cast to an integer type became a vector Select of 1 and 0 in that type, which
    the vector unit has for half and float only (g++ failed on the twin's static assertion)."""
    a = np.array([1.0, 2.0, 3.0, -1.0], np.float32)
    b = np.array([1.0, 0.0, 5.0, 2.0], np.float32)
    c = np.array([[-2]], np.int32)
    d = np.array([[17]], np.int64)
    ne, lt, taken = run(masks_as_integers, a, b, c, d, backend=backend)
    assert ne.dtype == np.int32 and ne.tolist() == [0, 1, 1, 1]
    assert lt.dtype == np.uint8 and lt.tolist() == [0, 0, 1, 1]
    assert taken.tolist() == [[[1]]]
