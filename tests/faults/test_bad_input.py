"""Bad input gets a clear error at the user's own line, never a wrong answer, an out-of-bounds read or a raw
exception from deep inside: arrays unlike those an artifact was compiled for, bad schedule knobs, annotations
that say something else than they mean, numpy functions and caught errors in operator bodies, masked arrays,
None for a tensor."""
import inspect

import numpy as np
import pytest

import xbench as xb
from xbench import Tensor
from xbench.errors import ArgumentError, DTypeError, ScheduleError, ShapeError, TraceError

HERE = __file__


def _line(fn, text: str) -> int:
    """The line of `fn`'s source holding `text`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


@xb.tensor_op
def twice(x: Tensor["N", "D"]):
    return x * 2


X = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 100


@pytest.mark.parametrize("backend", ["cpu", "cuda", "ascend", "reference"])
def test_an_artifact_refuses_arrays_unlike_those_it_was_compiled_for(backend):
    art = twice.compile(backend, X)
    with pytest.raises(ShapeError, match=r"compiled for input 'x' of shape \(64, 64\), got \(2, 2\)") as err:
        art.run(np.ones((2, 2), np.float32))      # cpu read (64, 64) out of bounds and returned it
    assert err.value.loc.filename == HERE
    with pytest.raises(DTypeError, match="compiled for input 'x' of dtype float32, got float64"):
        art.run(X.astype(np.float64))
    with pytest.raises(ArgumentError, match=r"takes 1 array\(s\) \(x\), got 2"):
        art.run(X, X)
    with pytest.raises(ArgumentError, match="masked array"):
        art.run(np.ma.masked_array(X, mask=X > 1))
    wide = np.zeros((64, 128), np.float32)
    wide[:, ::2] = X
    strided, swapped = wide[:, ::2], X.astype(">f4")          # strides and byte order it does not assume: copied
    readonly = X.copy()
    readonly.flags.writeable = False
    for a in (strided, swapped, X.T.copy().T, readonly):
        np.testing.assert_allclose(art.run(a)[0], X * 2, rtol=1e-6)
        assert art.check_inputs([a])[0] is not a
    assert art.check_inputs([X])[0] is X                    # an array as compiled for is passed as it is


@pytest.mark.parametrize("backend, kernel, knobs, match", [
    ("cuda", "k0_elementwise", {"block": 0}, r"knob 'block' takes one of 32, 64, .* \(or an integer of at least "
                                             r"32\), got 0"),
    ("cuda", "k0_elementwise", {"block": True}, r"knob 'block' takes .*got True"),
    ("cuda", "k0_elementwise", {"blokc": 64}, r"has no schedule knob 'blokc'; did you mean 'block'\?"),
    ("cpu", "k0_elementwise", {"parallel": "yes"}, r"knob 'parallel' takes one of True, False, got 'yes'"),
    ("cpu", "k0_elementwise", {"fast_math": 1}, r"knob 'fast_math' takes one of True, False, got 1"),
    ("ascend", "k0_elementwise", {"tile_length": -5}, r"knob 'tile_length' takes one of 0, 256, .*got -5"),
])
def test_bad_knobs_name_the_knob_and_its_choices(backend, kernel, knobs, match):
    with pytest.raises(ScheduleError, match=match) as err:
        twice.run(X, backend=backend, schedule={kernel: knobs})        # block=0 was a ZeroDivisionError
    assert isinstance(err.value, ValueError) and err.value.loc.filename == HERE
    assert "default" in err.value.hint or "its knobs are" in err.value.hint


def test_an_in_range_number_is_still_accepted():
    np.testing.assert_allclose(twice.run(X, backend="cuda", schedule={"k0_elementwise": {"block": 48}}), X * 2)


def test_the_return_annotation_dtype_is_checked():
    @xb.tensor_op
    def halve(x: Tensor["N"]) -> Tensor["N", xb.int32]:
        return x / 2

    with pytest.raises(DTypeError, match=r"halve returns float32 but its annotation says Tensor\[N, int32\]") as e:
        halve(np.ones(3, np.float32))
    assert e.value.loc.lineno == _line(halve.fn, "return x / 2")

    @xb.tensor_op
    def ok(x: Tensor["N"]) -> Tensor["N", "float32"]:                  # a dtype given as a string is a dtype
        return x / 2
    np.testing.assert_array_equal(ok(np.ones(3, np.float32)), np.full(3, 0.5, np.float32))


def test_a_misspelt_dtype_is_refused_not_read_as_a_dim():
    with pytest.raises(TraceError, match=r"'flaot32' looks like a misspelt dtype; did you mean 'float32'\?") as e:
        @xb.tensor_op
        def f(x: Tensor["N", "flaot32"]):
            return x
    assert e.value.loc.filename == HERE
    with pytest.raises(TraceError, match="did you mean 'int64'"):
        Tensor["N", "itn64"]


def test_numpy_functions_in_a_body_are_named_at_the_users_line():
    @xb.tensor_op
    def norm(x: Tensor["N", "D"]):
        return np.linalg.norm(x)

    @xb.tensor_op
    def clipped(x: Tensor["N", "D"]):
        return np.clip(x, 0, 1)

    for op, text, name, hint in ((norm, "np.linalg.norm(x)", "np.linalg.norm", "xb.sqrt"),
                                 (clipped, "np.clip(x, 0, 1)", "np.clip", "xb.clip")):
        with pytest.raises(TraceError, match=rf"{name} cannot compute on a traced tensor") as err:
            op(X)
        assert (err.value.loc.filename, err.value.loc.lineno) == (HERE, _line(op.fn, text))  # not numpy's file
        assert hint in err.value.hint


def test_catching_the_branch_error_does_not_take_the_other_branch():
    @xb.tensor_op
    def sneaky(x: Tensor["N", "D"]):
        try:
            if x.sum() > 0:
                return x * 2
        except Exception:
            pass
        return x * 3

    with pytest.raises(TraceError, match="cannot branch on it") as err:
        sneaky(X)                                                      # silently returned x * 3
    assert err.value.loc.lineno == _line(sneaky.fn, "if x.sum() > 0") and "caught this error" in err.value.hint


def test_a_masked_array_is_refused_at_the_call():
    with pytest.raises(ArgumentError, match="'x' is a masked array") as err:
        twice(np.ma.masked_array(X, mask=X > 1))                       # the mask was dropped silently
    assert err.value.loc.lineno == _line(test_a_masked_array_is_refused_at_the_call, "twice(np.ma")


def test_none_for_a_tensor_points_at_the_call():
    @xb.tensor_op
    def mul(x: Tensor["N"], y: Tensor["N"]):
        return x * y

    @xb.tensor_op
    def maybe_bias(x: Tensor["N"], b: Tensor["N"] = None):
        return x if b is None else x + b

    with pytest.raises(ArgumentError, match=r"argument 'y' is None, but the operator declares it a tensor") as err:
        mul(np.ones(3, np.float32), None)
    assert err.value.loc.lineno == _line(test_none_for_a_tensor_points_at_the_call, "mul(np.ones(3")   # not the body
    one = np.ones(3, np.float32)
    np.testing.assert_array_equal(maybe_bias(one, None), one)          # an optional tensor may be None
    np.testing.assert_array_equal(maybe_bias(one, one), 2 * one)
