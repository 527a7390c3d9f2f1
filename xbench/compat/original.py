"""Running the original kernel: on the GPU where there is one, in numba's CUDA simulator otherwise; and reading
the launch configuration off a kernel's legacy launch code."""
from __future__ import annotations

import math
import sys
import types
import warnings

import numpy as np

from ..errors import ArgumentError, BackendError


def cuda_mode() -> str:
    """Where numba.cuda kernels run in this process: "gpu", or "simulator" (numba's CUDA simulator). Called before
    anything imports numba.cuda on a machine without a CUDA GPU, it switches the simulator on, so legacy kernels
    defined afterwards (`from numba import cuda`) can run and be checked against their lifted operators."""
    from ..backends.cuda import device
    device.cuda_module()
    return device.mode()


def cuda_runtime():
    """numba.cuda, if kernels can run in this process (else a BackendError saying why and what to do)."""
    from numba.core import config

    from ..backends.cuda import device
    if "numba.cuda" not in sys.modules:
        device.cuda_module()
    from numba import cuda
    if config.ENABLE_CUDASIM:
        return cuda
    if device.gpu_present():
        return cuda
    raise BackendError("the original kernel cannot run here: there is no CUDA GPU, and numba.cuda was imported "
                       "without its simulator", hint="call xb.compat.cuda_mode() (or set NUMBA_ENABLE_CUDASIM=1) "
                       "before anything imports numba.cuda; or pass verify=False to from_cuda")


def run_original(spec, inputs: dict, out_shapes: dict, out_dtypes: dict, launch: tuple) -> dict[str, np.ndarray]:
    """The kernel's outputs for `inputs` (the lifted operator's arguments by name), launched as the legacy code
    launches it. Outputs not passed in start as NaN (floats) so that an element no thread writes shows."""
    cuda_runtime()
    args = []
    outs = {}
    for p in spec.src.params:
        if p in spec.outs:
            if p in inputs:
                a = np.array(inputs[p], copy=True, order="C")
            else:
                a = np.empty(out_shapes[p], dtype=out_dtypes[p])
                fill = spec.init if spec.init is not None else _sentinel(a.dtype)
                a.fill(fill)
            outs[p] = a
            args.append(a)
        else:
            v = inputs[p]
            args.append(np.array(v, copy=True, order="C") if isinstance(v, np.ndarray) and v.ndim else
                        (v.item() if isinstance(v, np.ndarray) else v))
    block, grid = launch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            if spec.launch is not None:
                spec.launch(*args)
            else:
                spec.kernel_obj[grid, block](*args)
    return outs


def _sentinel(dtype: np.dtype):
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


class _Launched(Exception):
    pass


class _Recorder:
    """Stands in for the kernel inside legacy launch code: records `kernel[grid, block](...)`."""

    def __init__(self):
        self.launches: list[tuple] = []

    def __getitem__(self, cfg):
        cfg = cfg if isinstance(cfg, tuple) else (cfg,)
        if len(cfg) < 2:
            raise ArgumentError("a kernel launch needs [griddim, blockdim]")

        def launch(*args, **kwargs):
            self.launches.append((cfg[0], cfg[1]))
        return launch

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
        def launch(*args, **kwargs):
            t = int(tpb) or 128
            self.launches.append((max(1, math.ceil(int(ntasks) / t)), t))
        return launch


def capture_launch(spec, arrays: dict, scalars: dict) -> tuple[tuple, tuple]:
    """(block, grid) of the one launch the legacy launch code makes for arrays of these shapes."""
    from .lift import _dims
    fn = spec.launch
    rec = _Recorder()
    patched = _with(fn, spec.kernel_obj, rec)
    args = []
    for p in spec.src.params:
        if p in arrays:
            a = arrays[p]
            args.append(np.zeros(tuple(a.shape), dtype=_np_dtype(a)))
        else:
            v = scalars[p]
            args.append(v if isinstance(v, (int, float)) else 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        patched(*args)
    if len(rec.launches) != 1:
        raise ArgumentError(f"launch= ran the kernel {len(rec.launches)} times for one call; from_cuda lifts "
                            "launch code that launches it once",
                            hint="pass a function that computes the grid and launches the kernel once: "
                                 "def launch(*args): kernel[blocks, threads](*args)")
    grid, block = rec.launches[0]
    return _dims(block, "blockdim"), _dims(grid, "griddim")


def _np_dtype(a) -> np.dtype:
    from ..lang.tensor import Tensor
    if isinstance(a, Tensor):
        from ..dtypes import to_numpy
        return to_numpy(a.dtype)
    return np.dtype(a.dtype)


def _with(fn, kernel, replacement):
    """fn with every global or closure name bound to `kernel` bound to `replacement` instead."""
    if not isinstance(fn, types.FunctionType):
        raise ArgumentError(f"launch={fn!r} must be a Python function that launches the kernel")
    g = dict(fn.__globals__)
    hit = False
    for k, v in fn.__globals__.items():
        if v is kernel:
            g[k] = replacement
            hit = True
    cells = None
    if fn.__closure__:
        cells = []
        for c in fn.__closure__:
            try:
                val = c.cell_contents
            except ValueError:
                cells.append(c)
                continue
            if val is kernel:
                cells.append(types.CellType(replacement))
                hit = True
            else:
                cells.append(c)
        cells = tuple(cells)
    if not hit:
        raise ArgumentError(f"launch={fn.__name__} does not refer to the kernel by a global or enclosing name",
                            hint="write the launch as code that names the kernel (kernel[blocks, threads](...))")
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, cells)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new
