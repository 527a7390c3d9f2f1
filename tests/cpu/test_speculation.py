"""Which reads a select may make whatever its condition (`pyemit.speculable`): reads at plain indices, and reads
at computed indices whose range over the kernel's axes stays inside the buffer (`pyemit.index_range`)."""
import numpy as np

import xbench as xb
from xbench.backends.cpu.codegen import ModuleWriter
from xbench.backends.pyemit import index_range, speculable
from xbench.ir import expr as E
from xbench.ir.expr import Call, Const, Idx, Load, Select


def ix(fn, a, b):
    return Call(fn, (a, b), E.INDEX)


def c(v):
    return Const(v, E.INDEX)


def test_index_ranges_over_the_axes_extents():
    y, r = Idx("y"), Idx("r")
    ext = {"y": 8, "r": 3}
    assert index_range(ix("floordiv", y, c(2)), ext) == (0, 3)
    assert index_range(ix("mod", y, c(2)), ext) == (0, 1)
    assert index_range(ix("add", ix("add", ix("mul", y, c(2)), r), c(-1)), ext) == (-1, 15)
    assert index_range(ix("sub", y, r), ext) == (-2, 7)
    assert index_range(ix("minimum", ix("maximum", ix("sub", y, r), c(0)), c(5)), ext) == (0, 5)
    assert index_range(Idx("z"), ext) is None                                   # a variable of no known axis
    assert index_range(ix("add", y, Load("idx", (y,), E.INDEX)), ext) is None   # an index read from data


def test_a_stride_twos_guarded_read_is_made_and_a_padded_windows_is_not():
    x = np.zeros((2, 3, 4, 4), np.float32)
    prog = xb.ops.constant_pad_nd.lower(x, (1, 1, 1, 1))
    w = ModuleWriter(prog, {}, 2)
    name = prog.inputs[0]
    b, ch, y, xx = Idx("b"), Idx("c"), Idx("y"), Idx("x")
    w._extents = {"b": 2, "c": 3, "y": 8, "x": 8}
    zero = Const(0.0, "float32")
    even = Call("lt", (ix("mod", y, c(2)), c(1)), "bool")
    strided = Load(name, (b, ch, ix("floordiv", y, c(2)), ix("floordiv", xx, c(2))), "float32")
    assert w._in_bounds(strided)
    assert speculable(Select(even, strided, zero, "float32"), w._in_bounds)
    assert not speculable(Select(even, strided, zero, "float32"))                          # without knowing the ranges
    w._extents = {"b": 2, "c": 3, "y": 6, "x": 6}
    padded = Load(name, (b, ch, ix("add", y, c(-1)), ix("add", xx, c(-1))), "float32")
    inside = Call("ge", (ix("add", y, c(-1)), c(0)), "bool")
    assert not w._in_bounds(padded)
    assert not speculable(Select(inside, padded, zero, "float32"), w._in_bounds)
