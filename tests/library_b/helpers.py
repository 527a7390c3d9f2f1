"""Checks shared by the part-B library tests: a backend against the float64 reference (xb.verify, the tolerance
table) and the operator's result against PyTorch (an independent implementation)."""
from __future__ import annotations

import numpy as np
import torch

import xbench as xb

rng = np.random.default_rng(20240611)


def f32(*shape, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def ints(low: int, high: int, *shape, dtype=np.int64) -> np.ndarray:
    return rng.integers(low, high, size=shape).astype(dtype)


def tt(x):
    """numpy -> torch (float64 for floats: the comparison is against exact math), other values unchanged."""
    if isinstance(x, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(x))
        return t.double() if t.is_floating_point() else t
    if isinstance(x, (list, tuple)):
        return type(x)(tt(v) for v in x)
    return x


def to_numpy(t):
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    if isinstance(t, (tuple, list)):
        return tuple(to_numpy(v) for v in t)
    return np.asarray(t)


def as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def check(op, *args, torch_fn=None, backend: str = "cpu", rtol: float = 1e-5, atol: float = 1e-5,
          exact_ints: bool = True, outputs=None, **kw):
    """`op` on `backend` agrees with the reference backend (tolerance table) and, when `torch_fn` is given,
    with PyTorch on float64 copies of the inputs. Returns the backend's outputs."""
    for i, c in enumerate(xb.verify(op, *args, backend=backend, **kw)):
        assert c.ok, f"{op.name} on {backend}, output {i}: {c.message}"
    got = as_tuple(op.run(*args, backend=backend, **kw))
    if torch_fn is not None:
        want = as_tuple(to_numpy(torch_fn(*tt(list(args)))))
        sel = range(len(want)) if outputs is None else outputs
        assert len(got) >= len(sel), f"{op.name}: {len(got)} outputs, PyTorch gives {len(want)}"
        for i in sel:
            g, w = np.asarray(got[i]), np.asarray(want[i])
            assert g.shape == w.shape, f"{op.name} output {i}: shape {g.shape}, PyTorch {w.shape}"
            if w.dtype.kind in "iub" and exact_ints:
                assert g.dtype.kind == w.dtype.kind or w.dtype.kind == "b", \
                    f"{op.name} output {i}: dtype {g.dtype}, PyTorch {w.dtype}"
                np.testing.assert_array_equal(g, w, err_msg=f"{op.name} output {i}")
            else:
                np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                           err_msg=f"{op.name} output {i}")
    return got
