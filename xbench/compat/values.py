"""What the kernel interpreter holds: references to arrays, per-thread state, loop contexts and the launch."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import expr as E
from .memory import Write  # noqa: F401  (re-exported for the interpreter's parts)
from .source import KernelSource


@dataclass(frozen=True)
class ArrayRef:
    """A kernel array argument, or a view of it with leading indices fixed (`A[i]` of a matrix)."""
    name: str
    prefix: tuple = ()


@dataclass(frozen=True)
class SharedRef:
    name: str


@dataclass(frozen=True)
class LocalRef:
    key: int
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Poison:
    """A value the lifted operator cannot give (an atomic's old value, a variable after a loop whose last
    iteration differs between threads): using it is an error."""
    reason: str
    line: int


@dataclass
class LoopCtx:
    sym: E.Sym | None                      # the iteration variable of a loop interpreted once, else None
    cont: E.Node = E.FALSE                 # threads that left this iteration (continue)
    brk: E.Node = E.FALSE                  # threads that left the loop (break, or their last iteration)
    shared_marks: dict = field(default_factory=dict)
    stale_reads: set = field(default_factory=set)
    carries: frozenset = frozenset()


@dataclass
class Frame:
    src: KernelSource
    env: dict
    returns: list = field(default_factory=list)
    loops: list = field(default_factory=list)


@dataclass
class State:
    frames: list
    live: E.Node
    arrays: dict
    shared: dict
    local: dict
    phase: int = 0

    def clone(self) -> State:
        frames = [Frame(f.src, dict(f.env), list(f.returns), list(f.loops)) for f in self.frames]
        return State(frames, self.live, {k: a.clone() for k, a in self.arrays.items()},
                     {k: s.clone() for k, s in self.shared.items()}, {k: dict(v) for k, v in self.local.items()},
                     self.phase)


class Threads:
    """The launch as the interpreter sees it: per axis (x, y, z) a global coordinate variable, block and grid."""

    def __init__(self, block: tuple[int, ...], grid: tuple[int, ...]):
        self.block, self.grid = tuple(block), tuple(grid)
        self.syms = [E.Sym("xyz"[d], "thread", b * g, axis=d, block=b) for d, (b, g) in enumerate(zip(block, grid))]

    @property
    def ndim(self) -> int:
        return len(self.block)

    def g(self, d: int) -> E.Node:
        return self.syms[d] if d < self.ndim else E.ZERO

    def local(self, d: int) -> E.Node:
        return E.mod_c(self.syms[d], self.block[d]) if d < self.ndim else E.ZERO

    def block_index(self, d: int) -> E.Node:
        return E.floordiv_c(self.syms[d], self.block[d]) if d < self.ndim else E.ZERO

    def local_coords(self) -> list:
        return [(self.local(d), self.block[d], self.syms[d]) for d in range(self.ndim)]


def _same(a, b) -> bool:
    try:
        return a is b or (type(a) is type(b) and not isinstance(a, E.Node) and a == b)
    except Exception:
        return False
