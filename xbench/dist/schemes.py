"""Gradient compression schemes and the bytes each puts on the wire (no torch needed).

Per rank, for n float32 gradient values on p ranks (sizes rounded up to whole blocks and to p equal parts):

- plain ring AllReduce (fp32): 2(p-1)/p x 4n
- two-phase (compressed reduce-scatter as an all-to-all of codes, sum on the owner, re-compress the shard,
  all-gather of codes): 2(p-1)/p x C(n), with C the compressed size (codes + one int8 exponent per block)
- all-gather form (every rank all-gathers everyone's compressed buffer and sums): (p-1) x C(n)

so the all-gather form moves p/2 x C(n) / 4n of the ring's bytes: it grows with p, the two-phase form does not.
With int8 (C = n + n/256) it sends more than the ring from p = 8, with int4 (C = n/2 + n/256) from p = 16, with
fp16 from p = 5 (`break_even`).

    >>> wire_bytes("int4", "two-phase", 1 << 20, 8) / wire_bytes("fp32", "ring", 1 << 20, 8)
    0.1259765625
"""
from __future__ import annotations

from dataclasses import dataclass

from .codec import BLOCK

SCHEMES = ("fp32", "fp16", "bf16", "int8", "int4")
FORMS = ("ring", "two-phase", "all-gather")
BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8, "int4": 4}
_ALIASES = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "none": "fp32",
            "twophase": "two-phase", "two_phase": "two-phase", "allgather": "all-gather", "all_gather": "all-gather",
            "reduce-scatter": "two-phase", "rs": "two-phase", "ag": "all-gather", "allreduce": "ring"}


def scheme_name(s: str) -> str:
    k = _ALIASES.get(s.strip().lower(), s.strip().lower())
    if k not in SCHEMES:
        raise ValueError(f"xbench: unknown compression {s!r}; write one of {', '.join(SCHEMES)}")
    return k


def form_name(f: str) -> str:
    k = _ALIASES.get(f.strip().lower(), f.strip().lower())
    if k not in FORMS:
        raise ValueError(f"xbench: unknown form {f!r}; write 'two-phase' or 'all-gather' (or 'ring' for plain "
                         f"AllReduce)")
    return k


def padded(n: int, p: int, scheme: str, form: str, block: int = BLOCK) -> int:
    """Values actually sent: whole blocks, and p equal parts of whole blocks for the two-phase form."""
    s = scheme_name(scheme)
    if s in ("int8", "int4"):
        unit = block * (p if form_name(form) == "two-phase" else 1)
    else:
        unit = p if form_name(form) == "two-phase" else 1
    return -(-n // unit) * unit


def compressed_bytes(n: int, scheme: str, block: int = BLOCK) -> int:
    """Bytes of n values in `scheme` (int codes plus one int8 exponent per block)."""
    s = scheme_name(scheme)
    if s in ("int8", "int4"):
        return n * BITS[s] // 8 + -(-n // block)
    return n * BITS[s] // 8


def wire_bytes(scheme: str, form: str, n: int, p: int, block: int = BLOCK) -> float:
    """Bytes one rank sends for n float32 values on p ranks (the model: ring schedules, exact block sizes)."""
    s, f = scheme_name(scheme), form_name(form)
    if p <= 1:
        return 0.0
    if f == "ring":
        return 2 * (p - 1) / p * n * BITS[s] // 8 if s in ("fp32", "fp16", "bf16") else _no(s, f)
    m = padded(n, p, s, f, block)
    c = compressed_bytes(m, s, block)
    if f == "two-phase":
        return 2 * (p - 1) / p * c
    return (p - 1) * c


def _no(s: str, f: str) -> float:
    raise ValueError(f"xbench: {s} has no '{f}' form (integer codes cannot be summed on the wire); use "
                     f"'two-phase' or 'all-gather'")


def ratio(scheme: str, form: str, n: int, p: int) -> float:
    """Wire bytes relative to a float32 ring AllReduce of the same gradients."""
    return wire_bytes(scheme, form, n, p) / wire_bytes("fp32", "ring", n, p)


def break_even(scheme: str, n: int = 1 << 24, limit: int = 1 << 16) -> int | None:
    """The smallest world size at which the all-gather form sends more than a float32 ring AllReduce."""
    p = 2
    while p <= limit:
        if ratio(scheme, "all-gather", n, p) > 1.0:
            return p
        p += 1
    return None


@dataclass(frozen=True)
class Saving:
    scheme: str
    form: str
    world: int
    ratio: float

    @property
    def saving(self) -> float:
        return 1.0 - self.ratio


def savings(n: int = 1 << 24, worlds=(2, 4, 8, 16, 32, 128, 1024, 10000)) -> list[Saving]:
    """The saving of every scheme and form against a float32 ring AllReduce, per world size."""
    out = []
    for s in SCHEMES[1:]:
        for f in ("two-phase", "all-gather"):
            for p in worlds:
                out.append(Saving(s, f, p, ratio(s, f, n, p)))
    return out
