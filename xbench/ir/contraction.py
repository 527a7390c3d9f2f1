"""How a contraction kernel reads and writes: shared by the backends that generate contraction templates and by
the models (traces, predictor) that price them, so the plan is decided in one place."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from .expr import Expr, Idx, Load, Local
from .kernel import Assign, Axis, Buffer, Contract, Kernel, Store


def roles(kernel: Kernel) -> tuple[Contract, list[Axis], list[Axis], list[Axis]] | None:
    """(contract stage, batch axes, M axes, N axes) when the kernel is a contraction followed only by per-point
    epilogue stages (`Contract.roles` splits the outer axes); None otherwise."""
    if not kernel.stages or not isinstance(kernel.stages[0], Contract):
        return None
    for s in kernel.stages[1:]:
        if not isinstance(s, (Assign, Store)) or (isinstance(s, Store) and (s.axes or s.scope == "row")):
            return None
    c = kernel.stages[0]
    nb, nm, nn = c.roles
    if nb + nm + nn != len(kernel.outer) or not nm or not nn:
        return None
    o = kernel.outer
    return c, list(o[:nb]), list(o[nb:nb + nm]), list(o[nb + nm:])


def operand_view(e: Expr, buffers: Mapping[str, Buffer], rows: Sequence[Axis], cols: Sequence[Axis],
                 batch: Sequence[Axis]) -> tuple[str, bool] | None:
    """(buffer, transposed) when operand `e` is a plain load of a whole buffer that reads, per batch point, as a
    row-major [rows, cols] matrix (transposed: stored as [cols, rows]); None when it must be packed."""
    if not isinstance(e, Load) or e.buf not in buffers or not all(isinstance(i, Idx) for i in e.index):
        return None
    names = [i.name for i in e.index]
    b = [a.name for a in batch if a.name in names]
    r, c = [a.name for a in rows], [a.name for a in cols]
    if len(set(names)) != len(names) or sorted(names) != sorted(b + r + c) or names[:len(b)] != b:
        return None
    extent = {a.name: a.extent for a in (*batch, *rows, *cols)}
    if tuple(extent[n] for n in names) != tuple(buffers[e.buf].shape):
        return None
    rest = names[len(b):]
    if rest == r + c:
        return e.buf, False
    if rest == c + r:
        return e.buf, True
    return None


def direct_output(kernel: Kernel, c: Contract, buffers: Mapping[str, Buffer]) -> str | None:
    """The output buffer when the epilogue is a plain store of the accumulator at the outer point (the GEMM can
    write it in place); None when an epilogue must run."""
    st = kernel.stages[1:]
    if len(st) != 1 or not isinstance(st[0], Store):
        return None
    s = st[0]
    if not (isinstance(s.value, Local) and s.value.name == c.local):
        return None
    if tuple(s.index) != tuple(a.var for a in kernel.outer) or buffers[s.buf].dtype != c.dtype:
        return None
    return s.buf
