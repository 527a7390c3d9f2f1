"""Memory as one symbolic thread sees it: global arrays (the kernel's array arguments), shared memory (per block)
and which thread wrote what.

A write is recorded with the thread's index expression, value and condition. Which thread writes an element is
found by inverting the index (`invert`): each index component must be an affine, one-to-one function of the
thread coordinates and loop iterations it uses (`i`, `b * blockDim + t`, `g + k * gridsize`, strided `2 * i + 1`).
Global writes take effect for other threads at a grid-wide barrier or at the end of the kernel (`commit`), which
turns them into a new version of the array: an expression over element positions. Shared memory is read through
the writer: a read of `sA[ty, j]` after `cuda.syncthreads()` is the value the thread with `(ty, tx) = (ty, j)`
in the same block stored, its thread-local coordinates substituted.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import expr as E
from .errors import LiftError


@dataclass
class Write:
    idx: tuple[E.Node, ...]
    value: E.Node
    cond: E.Node
    line: int
    op: str = "store"                 # store | add | max | min (atomics)
    coords: tuple[E.Sym, ...] = ()    # the thread's coordinates and the symbolic loop iterations around it
    phase: int = 0
    loop_depth: int = 0


@dataclass
class Read:
    idx: tuple[E.Node, ...]
    line: int


@dataclass
class GlobalArray:
    """One array argument of the kernel: its current version and this phase's writes and reads."""
    name: str
    dtype: str
    shape: tuple[E.Node, ...]
    v0: E.Source
    current: E.Source
    pending: list[Write] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    versions: list[E.Source] = field(default_factory=list)
    read_v0: bool = False             # the kernel reads what the caller passed (an in-out argument)
    written: bool = False
    stored: list = field(default_factory=list)    # (dtype, weak) of each value stored, before the store's cast

    def clone(self) -> GlobalArray:
        return GlobalArray(self.name, self.dtype, self.shape, self.v0, self.current, list(self.pending),
                           list(self.reads), list(self.versions), self.read_v0, self.written, list(self.stored))


@dataclass
class SharedArray:
    name: str
    shape: tuple[int, ...]
    dtype: str
    line: int
    writes: list[Write] = field(default_factory=list)

    def clone(self) -> SharedArray:
        return SharedArray(self.name, self.shape, self.dtype, self.line, list(self.writes))


# ---- inverting an index ------------------------------------------------------------------------------

def coord_extent(c: E.Node) -> int:
    if isinstance(c, E.Sym):
        return c.extent
    if isinstance(c, E.Mod):
        return c.c
    raise AssertionError(c)


def invert(idx: tuple[E.Node, ...], coords: list[E.Node], pos: tuple[E.Node, ...]):
    """Solve idx(coords) == pos for the coordinates that idx uses: ({coord: expr of pos}, validity condition),
    or None when idx is not one-to-one in them (or not affine)."""
    sol: dict[E.Node, E.Node] = {}
    cond = E.TRUE
    cset = set(coords)
    used: set = set()
    idx, pos, cond = _fuse_divmod(tuple(idx), tuple(pos), cset, cond)
    for comp, p in zip(idx, pos):
        parts = E._lin_parts(comp)
        if parts is None:
            return None
        terms, c0 = parts
        mine = {t: k for t, k in terms.items() if t in cset}
        others = {t: k for t, k in terms.items() if t not in cset}
        if any(t.free & cset for t in others):       # a coordinate inside a non-affine atom (i // 2, x[i])
            return None
        if used & set(mine):
            return None
        used |= set(mine)
        q = E.sub(p, E.lin(others, c0))
        if not mine:
            cond = E.land(cond, E.compare("eq", q, E.ZERO))
            continue
        items = sorted(mine.items(), key=lambda kv: abs(kv[1]))
        a1 = items[0][1]
        if a1 < 0:
            if len(items) > 1:
                return None
            q, a1 = E.neg(q), -a1
            items = [(items[0][0], a1)]
        if a1 > 1:
            cond = E.land(cond, E.compare("eq", E.mod_c(q, a1), E.ZERO))
            q = E.floordiv_c(q, a1)
        cond = E.land(cond, E.compare("ge", q, E.ZERO))
        radix = 1
        for n, (c, k) in enumerate(items):
            if k != a1 * radix:
                return None
            ext = coord_extent(c)
            part = E.floordiv_c(q, radix)
            if n + 1 < len(items):
                sol[c] = E.mod_c(part, ext)
            else:
                sol[c] = part
                cond = E.land(cond, E.compare("lt", part, E.const(ext)))
            radix *= ext
    return sol, cond


def _fuse_divmod(idx: tuple, pos: tuple, cset: set, cond: E.Node):
    """`out[g // m, g % m]` (a flat index split over two axes) is the one component g at position m * p0 + p1."""
    idx, pos = list(idx), list(pos)
    for a in range(len(idx)):
        qa = idx[a]
        if not isinstance(qa, E.FloorDiv) or not (qa.a.free & cset):
            continue
        for b in range(len(idx)):
            rb = idx[b]
            if b != a and isinstance(rb, E.Mod) and rb.a is qa.a and rb.c == qa.c:
                cond = E.land(cond, E.compare("lt", pos[b], E.const(qa.c)))
                merged = E.add(E.mul(pos[a], E.const(qa.c)), pos[b])
                keep = [i for i in range(len(idx)) if i not in (a, b)]
                return tuple([qa.a] + [idx[i] for i in keep]), tuple([merged] + [pos[i] for i in keep]), cond
    return tuple(idx), tuple(pos), cond


def pin(cond: E.Node, free: set) -> dict:
    """Coordinates a condition fixes (`tid == 0`): {coord: value}."""
    out = {}
    for c in E.conjuncts(cond):
        if isinstance(c, E.Bin) and c.op == "eq" and E.is_int(c.a.dtype):
            parts = E._lin_parts(E.sub(c.a, c.b))
            if parts is None:
                continue
            terms, c0 = parts
            vs = [t for t in terms if t in free]
            if len(vs) == 1 and abs(terms[vs[0]]) == 1 and not any(t.free & free for t in terms if t is not vs[0]):
                v = vs[0]
                k = terms[v]
                rest = E.lin({t: kk for t, kk in terms.items() if t is not v}, c0)
                out[v] = E.neg(rest) if k == 1 else rest
    return out


# ---- committing a phase's global writes ------------------------------------------------------------------

def commit(arr: GlobalArray, init, kernel) -> None:
    """Turn this phase's writes into a new version of `arr` (an expression over element positions)."""
    if not arr.pending:
        arr.reads.clear()
        return
    _check_races(arr, kernel)
    n = len(arr.versions) + 1
    pos = tuple(E.Sym(f"{arr.name}_{d}", "pos", E.concrete(s), s, axis=d) for d, s in enumerate(arr.shape))
    if arr.current is arr.v0:
        if init is not None:
            old = E.cast(E.const(init), arr.dtype)
        elif arr.read_v0:
            old = E.load(arr.v0, pos)
        else:
            old = E.unwritten(arr.v0, arr.name, arr.dtype)
    else:
        old = E.subst(arr.current.content, dict(zip(arr.current.pos, pos)))
    content = old
    for w in arr.pending:
        content = _apply(content, w, pos, arr, kernel)
    from .simplify import simplify
    content = simplify(content)
    src = E.Source(arr.name, arr.dtype, arr.shape, n, content, pos)
    arr.versions.append(src)
    arr.current = src
    arr.pending = []
    arr.reads = []


def _apply(content: E.Node, w: Write, pos, arr: GlobalArray, kernel) -> E.Node:
    coords = list(w.coords)
    got = invert(w.idx, coords, pos)
    if got is None:
        raise LiftError(f"cannot tell which thread writes {arr.name} at line {kernel.lineno(w.line)} "
                        f"(`{kernel.code(w.line)}`): the index is not a one-to-one affine function of the thread and "
                        "loop indices", w.line, kernel,
                        construct="store address",
                        hint="write each element from one thread, at an index such as i, i + c, b * blockDim + t "
                             "or a grid-stride position")
    sol, valid = got
    free = {c for c in coords if c not in sol}
    value, cond = w.value, w.cond
    if w.op == "store":
        pins = pin(cond, free)
        # a loop of the thread's own that stores to one element every iteration: its last iteration's store stays
        for c in [c for c in free if c.sym_kind == "loop" and c not in cond.free]:
            pins[c] = E.sub(c.extent_node(), E.ONE)
        if pins:
            value, cond = E.subst(value, pins), E.subst(cond, pins)
            free -= set(pins)
        if (value.free | cond.free) & free:
            raise LiftError(f"several threads write {arr.name}[...] with different values (a race) at line "
                            f"{kernel.lineno(w.line)}", w.line, kernel, construct="racing store",
                            hint="have one thread write each element (guard the store with a condition on the "
                                 "thread index), or accumulate with cuda.atomic.add")
        value = E.cast(E.subst(value, sol), arr.dtype)
        cond = E.land(valid, E.subst(cond, sol))
        return E.select(cond, value, content)
    # an atomic update: every thread whose address is this element contributes
    value = E.cast(E.subst(value, sol), arr.dtype)
    cond = E.land(valid, E.subst(cond, sol))
    kind = {"add": "sum", "sub": "sum", "max": "max", "min": "min"}[w.op]
    if w.op == "sub":
        value = E.neg(value)
    term = E.select(cond, value, E.identity(kind, arr.dtype))
    for c in sorted(free, key=lambda s: s.order):
        r = E.Sym(c.name, "red", coord_extent(c))
        term = E.reduce_(kind, r, E.subst(term, {c: r}))
    if kind == "sum":
        return E.add(content, term)
    return E.binary(kind, content, term)


def _check_races(arr: GlobalArray, kernel) -> None:
    stores = [w for w in arr.pending if w.op == "store"]
    atomics = [w for w in arr.pending if w.op != "store"]
    if stores and atomics:
        raise LiftError(f"{arr.name} is both stored to and updated atomically in one launch phase", atomics[0].line,
                        kernel, construct="mixed atomic and plain stores",
                        hint="separate them with a grid-wide barrier or into two kernels")
    for r in arr.reads:
        for w in arr.pending:
            if w.op != "store" or r.idx is not w.idx and tuple(r.idx) != tuple(w.idx):
                raise LiftError(f"line {kernel.lineno(r.line)} (`{kernel.code(r.line)}`) reads {arr.name} while "
                                f"other threads write {arr.name} in the same launch (line {kernel.lineno(w.line)}) "
                                "without a grid-wide barrier: the result depends on the order threads run in",
                                r.line, kernel, construct="read-write race on a global array",
                                hint="read from one array and write another (double buffering), or synchronise "
                                     "the grid between the read and the write")


# ---- reading shared memory -------------------------------------------------------------------------------

def read_shared(sh: SharedArray, idx: tuple[E.Node, ...], phase: int, local: list[tuple[E.Node, int, E.Node]],
                line: int, kernel) -> tuple[E.Node, int]:
    """The value a thread reads at sh[idx] (the latest write to that element by any thread of its block) and
    the earliest write consulted. `local`: the block's thread-local coordinates (atom, block size, global
    coordinate)."""
    if len(idx) != len(sh.shape):
        raise LiftError(f"{sh.name} has {len(sh.shape)} dims but is indexed with {len(idx)}", line, kernel,
                        construct="shared-memory index")
    chain = []
    first = len(sh.writes)
    for n in range(len(sh.writes) - 1, -1, -1):
        v, c = _through_writer(sh, sh.writes[n], idx, phase, local, line, kernel)
        chain.append((v, c))
        first = n
        if E.decide(c) is True:
            break
    result = E.unwritten(sh, sh.name, sh.dtype)
    for v, c in reversed(chain):
        result = E.select(c, v, result)
    return result, first


def _through_writer(sh: SharedArray, w: Write, idx, phase: int, local, line: int, kernel):
    atoms = [a for a, _, _ in local]
    if tuple(idx) == tuple(w.idx) and _injective(w.idx, atoms):
        return w.value, w.cond               # the thread's own element
    got = invert(w.idx, atoms, idx)
    if got is None:
        raise LiftError(f"cannot tell which thread of the block wrote {sh.name}[...] at line {kernel.lineno(w.line)}: "
                        "shared-memory writes must go to an affine, one-to-one function of the thread indices",
                        w.line, kernel, construct="shared-memory address",
                        hint="index shared arrays by cuda.threadIdx (as sA[ty, tx])")
    sol, valid = got
    if w.phase >= phase:
        raise LiftError(f"line {kernel.lineno(line)} reads {sh.name}, which other threads of the block write at line "
                        f"{kernel.lineno(w.line)}, with no cuda.syncthreads() in between", line, kernel,
                        construct="shared-memory race", hint="call cuda.syncthreads() between the write and the read")
    m = {g: E.add(E.mul(E.floordiv_c(g, bd), E.const(bd)), sol[atom]) for atom, bd, g in local if atom in sol}
    v, c = E.subst(w.value, m), E.subst(w.cond, m)
    for atom, bd, g in local:
        if atom in sol or g not in (v.free | c.free):
            continue
        t = E.Sym("_t", "red", bd)
        other = {g: E.add(E.mul(E.floordiv_c(g, bd), E.const(bd)), t)}
        if t in (E.subst(v, other).free | E.subst(c, other).free):
            raise LiftError(f"several threads of the block write {sh.name}[...] with different values (a race) at "
                            f"line {kernel.lineno(w.line)}", w.line, kernel, construct="shared-memory race",
                            hint="give each thread its own element")
    return v, E.land(valid, c)


def _injective(idx, atoms) -> bool:
    got = invert(idx, atoms, tuple(E.Sym("_", "pos", 1) for _ in idx))
    return got is not None and len(got[0]) == len(atoms)
