"""Runs a registered operator's own samples (`xb.ops.info(name).samples`): each backend against the float64
reference (xb.verify) and the reference against the registered PyTorch counterpart, as the library grid
does, for the part-B operators while they are developed."""
from __future__ import annotations

import functools

import numpy as np
import torch

import xbench as xb
from xbench.ops import SHAPES, NoTorch


def torch_fn(spec):
    if isinstance(spec, str):
        return functools.reduce(getattr, spec.split(".")[1:], torch)
    return functools.partial(spec, torch)


def is_float_array(v) -> bool:
    return isinstance(v, np.ndarray) and (v.dtype.kind == "f" or v.dtype.name == "bfloat16")


def wide(v):
    """Float arrays as float64 (the comparison with PyTorch is of exact math); anything else unchanged."""
    if is_float_array(v):
        return v.astype(np.float64)
    if isinstance(v, (list, tuple)) and any(isinstance(e, np.ndarray) for e in v):
        return type(v)(wide(e) for e in v)
    return v


def to_torch(v):
    if isinstance(v, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(wide(v)))
    if isinstance(v, (list, tuple)) and any(isinstance(e, np.ndarray) for e in v):
        return type(v)(to_torch(e) for e in v)
    return v


def compare_torch(got, want, what: str):
    want = want if isinstance(want, (tuple, list)) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want), f"{what}: {len(got)} outputs, PyTorch {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        w = w.detach().numpy() if isinstance(w, torch.Tensor) else np.asarray(w)
        g = np.asarray(g)
        assert g.shape == w.shape, f"{what} output {i}: shape {g.shape}, PyTorch {w.shape}"
        if w.dtype.kind in "iub":
            assert g.dtype.kind == w.dtype.kind, f"{what} output {i}: dtype {g.dtype}, PyTorch {w.dtype}"
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {i}")
        else:
            np.testing.assert_allclose(g.astype(np.float64), w, rtol=1e-6, atol=1e-6, equal_nan=True,
                                       err_msg=f"{what} output {i}")


def run_samples(name: str, dtype: str = "float32", shapes: str = "quick", backends=("cpu",),
                with_torch: bool = True) -> int:
    """Every sample of `name` for `dtype`: backends vs reference, reference vs PyTorch. Returns the count."""
    info = xb.ops.info(name)
    op = info.op
    count = 0
    for s in info.samples(dtype, SHAPES[shapes]):
        what = f"{name}{s!r}"
        for backend in backends:
            for i, c in enumerate(xb.verify(op, *s.args, backend=backend, **s.kwargs)):
                assert c.ok, f"{what} on {backend}, output {i}: {c.message}"
        if with_torch and info.torch is not None and not isinstance(info.torch, NoTorch):
            ref = op.run(*[wide(a) for a in s.args], backend="reference",
                         **{k: wide(v) for k, v in s.kwargs.items()})
            want = torch_fn(info.torch)(*[to_torch(a) for a in s.args], **{k: to_torch(v)
                                                                          for k, v in s.kwargs.items()})
            compare_torch(ref, want, what + " vs PyTorch")
        count += 1
    assert count, f"{name} has no samples for {dtype}"
    return count
