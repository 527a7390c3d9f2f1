"""What xb.compat.from_cuda refuses, and how: each construct outside the lifted forms is a LiftError naming the
construct and the kernel's own line (never a wrong operator); bad arguments to from_cuda and to a lifted
operator are errors that say what to pass instead."""
from pathlib import Path

import numpy as np
import pytest

import xbench as xb
from xbench.compat import LiftError

from . import kernels as K

SOURCE = Path(K.__file__).read_text().splitlines()


def line_of(mark: str) -> int:
    return next(i for i, text in enumerate(SOURCE, 1) if f"# mark: {mark}" in text)


@pytest.mark.parametrize("kernel, out, kw, construct, mark", [
    (K.warp_reduce, "out", {}, "warp intrinsic", "shfl"),
    (K.histogram, "bins", {"init": 0, "shape": (8,)}, "atomic with a data-dependent address", "histogram"),
    (K.factorials, "out", {}, "recursion", "recursion"),
    (K.unguarded, "out", {}, "out-of-bounds access", "unguarded"),
    (K.no_barrier, "out", {}, "shared-memory race", "race"),
    (K.until_small, "out", {}, "data-dependent while loop", "while"),
    (K.writes_input, "out", {}, "store to an input", "writes input"),
], ids=["warp", "data-dependent-atomic", "recursion", "out-of-bounds", "race", "while", "writes-input"])
def test_constructs_outside_the_forms_name_the_construct_and_line(kernel, out, kw, construct, mark):
    with pytest.raises(LiftError) as e:
        xb.compat.from_cuda(kernel, out=out, **kw)
    assert e.value.construct == construct
    assert e.value.kernel_line == line_of(mark)
    assert e.value.loc.filename == K.__file__ and e.value.hint
    assert f"kernels.py:{line_of(mark)}" in str(e.value)


def test_an_output_left_partly_unwritten_needs_init():
    with pytest.raises(LiftError, match=r"leaves elements of out \(which, the data decide\) unwritten") as e:
        xb.compat.from_cuda(K.positives, out="out")
    assert e.value.construct == "output not fully written" and "init=" in e.value.hint
    op = xb.compat.from_cuda(K.positives, out="out", init=0.0)
    x = np.random.default_rng(0).standard_normal(40).astype(np.float32)
    np.testing.assert_array_equal(op(x), np.where(x > 0, x, 0))


def test_a_launch_too_small_for_the_output_is_refused():
    with pytest.raises(LiftError, match="unwritten"):
        xb.compat.from_cuda(K.saxpy, out="out", block=8, grid=1)      # 8 threads for 77 elements


def test_bad_arguments_to_from_cuda():
    with pytest.raises(xb.XbenchError, match=r"(?s)out=.z. is not a parameter of saxpy.*\(a, x, y, out\)"):
        xb.compat.from_cuda(K.saxpy, out="z")
    with pytest.raises(xb.XbenchError, match="needs out="):
        xb.compat.from_cuda(K.saxpy, out=())
    with pytest.raises(LiftError, match="not a Python function or a numba kernel"):
        xb.compat.from_cuda(42, out="out")
    with pytest.raises(xb.XbenchError, match="example= names"):
        xb.compat.from_cuda(K.saxpy, out="out", example={"a": 1.0, "q": np.zeros(3)})
    with pytest.raises(xb.XbenchError, match="block="):
        xb.compat.from_cuda(K.saxpy, out="out", block=(0,))


def test_bad_input_to_a_lifted_operator():
    op = xb.compat.from_cuda(K.saxpy, out="out")
    x = np.ones(10, np.float32)
    with pytest.raises(xb.XbenchError, match="dtype complex128"):
        op(1.0, x.astype(np.complex128), x)
    with pytest.raises(xb.XbenchError, match=r"saxpy\(\)"):
        op(1.0, x)                                                      # y missing
    heat = xb.compat.from_cuda(K.solve_heat_equation, out=("buf_0", "buf_1"),
                               example=dict(buf_0=np.zeros(9), timesteps=2, k=0.25))
    with pytest.raises(xb.XbenchError, match="timesteps is an integer argument"):
        heat(np.zeros(9), 2.5, 0.25)


def test_wrong_dtype_follows_numba_typing_or_is_refused():
    # an int32 input of a float kernel is promoted the way numba types the kernel (int * float -> float64)
    op = xb.compat.from_cuda(K.smooth, out="out")
    xi = np.arange(12, dtype=np.int32)
    out = np.zeros(12, np.float64)
    K.smooth[1, 32](xi, out)
    got = op(xi)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, out)
    # a string is not an array
    with pytest.raises(xb.XbenchError):
        op("abc")
