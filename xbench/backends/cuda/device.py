"""Where CUDA kernels run: on a GPU when the driver reports one, otherwise under numba's CUDA simulator.

The simulator must be chosen before `numba.cuda` is first imported (`NUMBA_ENABLE_CUDASIM=1`), so the GPU is
detected through the driver library itself (ctypes, `cuInit` + `cuDeviceGetCount`) without importing
numba.cuda. A user's own `NUMBA_ENABLE_CUDASIM` (0 or 1) is honoured as given.
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys
from typing import Any

from ...errors import BackendError
from ...hw.occupancy import SUPPORTED as _OCC_SUPPORTED
from ...hw.occupancy import OccupancyError, parse_cc

ENV = "NUMBA_ENABLE_CUDASIM"
# compute capabilities numba-cuda compiles for (7.5 .. 12.1) that the occupancy rules also describe
SUPPORTED_CC: tuple[tuple[int, int], ...] = tuple(cc for cc in _OCC_SUPPORTED if (7, 5) <= cc <= (12, 1))
DEFAULT_CC = (9, 0)


@functools.cache
def gpu_present() -> bool:
    """True when the CUDA driver loads and reports at least one device."""
    names = ("nvcuda.dll",) if sys.platform.startswith("win") else ("libcuda.so.1", "libcuda.so")
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if lib.cuInit(0) != 0:
                return False
            count = ctypes.c_int(0)
            return lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
        except AttributeError:
            return False
    return False


def user_choice() -> bool | None:
    """The user's NUMBA_ENABLE_CUDASIM: True (simulator), False (GPU), None (unset)."""
    value = os.environ.get(ENV)
    if value is None or value.strip() == "":
        return None
    return value.strip() not in ("0", "false", "False", "no")


def mode() -> str:
    """'gpu' or 'simulator': where `Artifact.run` executes kernels in this process."""
    loaded = sys.modules.get("numba.cuda")
    if loaded is not None:
        from numba.core import config
        return "simulator" if config.ENABLE_CUDASIM else "gpu"
    choice = user_choice()
    if choice is not None:
        return "simulator" if choice else "gpu"
    return "gpu" if gpu_present() else "simulator"


def cuda_module() -> Any:
    """`numba.cuda`, imported in the mode `mode()` chose (the simulator is switched on first when needed)."""
    want = mode()
    if "numba.cuda" not in sys.modules and want == "simulator":
        os.environ[ENV] = "1"
        from numba.core import config
        config.reload_config()
    from numba import cuda
    if want == "simulator":
        from .simulator import install
        install()
    if want == "gpu" and not gpu_present():
        raise BackendError("no CUDA GPU is visible here and the simulator is off (NUMBA_ENABLE_CUDASIM=0, or "
                           "numba.cuda was imported for a GPU before xbench)",
                           hint="unset NUMBA_ENABLE_CUDASIM (or set it to 1) before anything imports numba.cuda; "
                                "xbench then runs the kernels in numba's CUDA simulator")
    return cuda


def normalize_cc(cc: Any) -> tuple[int, int]:
    """'sm_90', '9.0', (9, 0), 90 -> (9, 0); refuses compute capabilities xbench cannot describe."""
    known = ", ".join(f"sm_{a}{b}" for a, b in SUPPORTED_CC)
    try:
        key = parse_cc(cc)
    except OccupancyError:
        raise BackendError(f"cannot read cc={cc!r} as a compute capability",
                           hint=f"write e.g. cc='sm_90', '9.0' or (9, 0); supported: {known}") from None
    if key not in SUPPORTED_CC:
        raise BackendError(f"compute capability sm_{key[0]}{key[1]} (cc={cc!r}) is not supported by the cuda "
                           f"backend", hint=f"use one of {known}")
    return key


def device_cc() -> tuple[int, int] | None:
    """The compute capability of the current GPU, when running on one."""
    if mode() != "gpu" or not gpu_present():
        return None
    cuda = cuda_module()
    return tuple(cuda.get_current_device().compute_capability)[:2]


def device_name() -> str | None:
    if mode() != "gpu" or not gpu_present():
        return None
    name = cuda_module().get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)
