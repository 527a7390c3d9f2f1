"""Mixed precision: `with xb.autocast("bf16"):` chooses per-operation precision while tracing, the usual way:
contractions (matmul, einsum, convolution) run on 16-bit operands with float32 accumulation; reductions,
transcendental functions (and so softmax, norms, losses) compute in float32; everything else follows type
promotion. The policy is part of an operator's specialisation key, so the same operator compiles once per
policy. `LossScaler` is dynamic loss scaling for float16 training."""
from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass

import numpy as np

from .. import dtypes as D

_state = threading.local()


def policy() -> str | None:
    """The low-precision dtype of the active autocast, or None."""
    return getattr(_state, "dtype", None)


@contextlib.contextmanager
def autocast(dtype="bf16", enabled: bool = True):
    """Trace operators with mixed precision (`dtype`: "bf16"/"bfloat16" or "fp16"/"float16")."""
    low = D.canonical(dtype) if enabled else None
    if low is not None and low not in ("float16", "bfloat16"):
        raise ValueError(f"autocast needs a 16-bit float type, got {dtype!r}; use 'bf16' or 'fp16'")
    prev = policy()
    _state.dtype = low
    try:
        yield
    finally:
        _state.dtype = prev


def contraction_dtype(dtype: str) -> str:
    """The operand type a contraction of `dtype` operands uses under the active policy."""
    low = policy()
    return low if low and dtype == "float32" else dtype


def full_precision(dtype: str) -> str:
    """The type reductions and transcendentals compute in under the active policy."""
    return "float32" if policy() and dtype in ("float16", "bfloat16") else dtype


@dataclass
class LossScaler:
    """Dynamic loss scaling: multiply the loss by `scale` before the backward pass, unscale the gradients,
    skip the step and halve the scale when any gradient is inf/NaN, double it after `growth_interval`
    clean steps."""
    scale: float = 2.0 ** 16
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    min_scale: float = 1.0
    _clean: int = 0
    skipped: int = 0

    def unscale(self, grads) -> tuple[list[np.ndarray], bool]:
        """(gradients / scale in float32, finite?) — update the scale; the caller skips the step if not finite."""
        out = [np.asarray(g, dtype=np.float32) / np.float32(self.scale) for g in grads]
        finite = all(bool(np.isfinite(g).all()) for g in out)
        if finite:
            self._clean += 1
            if self._clean >= self.growth_interval:
                self.scale *= self.growth_factor
                self._clean = 0
        else:
            self.scale = max(self.min_scale, self.scale * self.backoff_factor)
            self._clean = 0
            self.skipped += 1
        if not math.isfinite(self.scale):
            raise FloatingPointError("loss scale overflowed")
        return out, finite
