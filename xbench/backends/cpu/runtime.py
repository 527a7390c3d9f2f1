"""Host-side helpers the generated cpu modules import."""
from __future__ import annotations

import contextlib
import functools


@functools.cache
def _controller():
    from threadpoolctl import ThreadpoolController
    return ThreadpoolController()


@contextlib.contextmanager
def blas_threads(n: int):
    """Limit every loaded BLAS to `n` threads (kernels that run one GEMM per core ask for 1)."""
    with _controller().limit(limits=n, user_api="blas"):
        yield
