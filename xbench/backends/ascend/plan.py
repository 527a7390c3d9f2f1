"""The Unified Buffer plan of a kernel (every `InitBuffer`, the tile length that fits) and the launches
a program makes (entry, GM arguments, tiling struct, what the generator decided)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ALIGN = 128                 # tile lengths are multiples of 128 elements (whole 256-byte repeats)
SELECT_RESERVE = 8192       # Select in tensor modes needs 8 KiB of UB left free
MATH_SLOT = 256             # bytes of one scratch block of the scalar math helpers
SYS_WORKSPACE = 16 * 1024 * 1024   # the Matmul library's system workspace on Atlas A2
QUE_LIMIT = 8               # TQue buffers per TPosition (hardware event ids)


def prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


# ---- the UB plan --------------------------------------------------------------------------------------

@dataclass
class UbItem:
    """One InitBuffer call: `num` buffers of `per_elem * tileLength + fixed` bytes (rounded to 32), or of
    `fn(tileLength)` bytes."""
    name: str
    kind: str          # TQue | TBuf
    position: str      # VECIN | VECOUT | VECCALC
    num: int
    per_elem: int
    fixed: int = 0
    fn: Any = None

    def bytes(self, T: int) -> int:
        if self.fn is not None:
            return align(self.fn(T), 32)
        return align(self.per_elem * T + self.fixed, 32)


def ub_total(items: list[UbItem], T: int) -> int:
    return sum(i.num * i.bytes(T) for i in items)


def fit_tile(items: list[UbItem], budget: int, cap: int, need: int = ALIGN) -> int:
    """The largest multiple of ALIGN, at most `cap`, whose plan fits `budget`; 0 when not even `need` fits."""
    per = sum(i.num * i.per_elem for i in items)
    fixed = sum(i.num * align(i.fixed, 32) for i in items)
    if per == 0:
        return max(ALIGN, align(min(cap, need), ALIGN))
    T = (budget - fixed - 32 * len(items)) // per // ALIGN * ALIGN
    T = min(T, align(cap, ALIGN))
    while T >= ALIGN and ub_total(items, T) > budget:
        T -= ALIGN
    if align(need, ALIGN) > T:
        return 0
    return T


def plan_text(items: list[UbItem], T: int) -> str:
    return ", ".join(f"{i.name} {i.num} x {i.bytes(T)} B" for i in items)


# ---- launches -----------------------------------------------------------------------------------------

@dataclass
class Launch:
    """One kernel entry the host launches: its GM arguments, tiling struct and host tiling function."""
    entry: str
    kernel: str                    # the loop-IR kernel it belongs to
    role: str                      # main | pack | matmul
    args: list[str]                # buffer names (GM_ADDR parameters before workspace and tiling)
    struct: str                    # tiling struct name
    fields: list[tuple[str, str]]  # (name, comment); uint32_t each, after an optional TCubeTiling `cube`
    cube: bool = False
    cores: int = 48                # cores of the kind it runs on (vector cores, or cube cores for Matmul)
    workspace: int = 0             # bytes of GM workspace (the Matmul system workspace)
    plan: dict[str, Any] = field(default_factory=dict)   # what the generator decided (resources)

    @property
    def host(self) -> str:
        return f"{self.entry}_tiling"
