"""What every generated kernel class shares: names, GM tensors, the scalar writer and math helpers, the
entry function and tiling struct, and for the vector forms the InitBuffer calls of the UB plan and the tile
length that fits it."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from ...dtypes import is_float
from ...errors import BackendError
from ...ir.expr import Call, Local
from ...ir.kernel import Axis, Kernel
from ...ir.schedule import Schedule
from .cpp import SIZE, ScalarScope, ScalarWriter, Source, ctype, lit
from .plan import ALIGN, MATH_SLOT, SELECT_RESERVE, Launch, UbItem, align, fit_tile, plan_text, prod, ub_total
from .vecexpr import COMPOSED_BINARY, Domain, Features, Pool, VecEmitter

if TYPE_CHECKING:
    from .codegen import ProgramWriter


def ident(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return s if not s[0].isdigit() else "_" + s


def camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^0-9A-Za-z]", name) if p)


class KernelGen:
    """Shared by the generators: GM tensors, the scalar writer, math helpers, the UB plan and the entry."""

    role = "main"

    def __init__(self, pw: ProgramWriter, k: Kernel, sched: Schedule, entry: str):
        self.pw = pw
        self.k = k
        self.sched = sched
        self.entry = entry
        self.cls = "Kernel" + camel(entry)
        self.struct = camel(entry) + "Tiling"
        self.shapes = pw.shapes
        self.features = Features()
        self.math: set[str] = set()
        self.gm: list[str] = []
        self.row_ub: dict[str, str] = {}         # row buffer -> LocalTensor name (scalar access)
        self.sw = ScalarWriter(self.shapes, self._load, self._math)
        self.buffer_num = int(sched.get("buffer_num", 2))
        self.notes: list[str] = []

    # scalar code callbacks
    def gm_name(self, buf: str) -> str:
        if buf not in self.gm:
            self.gm.append(buf)
        return f"{ident(buf)}Gm"

    def _load(self, buf: str, off: str, dtype: str) -> str:
        if buf in self.row_ub:
            v = f"{self.row_ub[buf]}.GetValue({off})"
        else:
            v = f"{self.gm_name(buf)}.GetValue({off})"
        if dtype in ("float16", "bfloat16"):
            return f"static_cast<float>({v})"
        if dtype == "bool":
            return f"({v} != 0)"
        return v

    def _math(self, fn: str, dtype: str, args: list[str]) -> str:
        self.math.add(fn)
        return f"Math{camel(fn)}({', '.join(args)})"

    # pieces every class has
    def gm_members(self) -> list[str]:
        return [f"GlobalTensor<{ctype(self.pw.dtypes[b])}> {ident(b)}Gm;" for b in self.gm]

    def gm_init(self, src: Source) -> None:
        for b in self.gm:
            c = ctype(self.pw.dtypes[b])
            src(f"{ident(b)}Gm.SetGlobalBuffer((__gm__ {c}*){ident(b)}, {prod(self.shapes[b])});")

    def math_helpers(self, src: Source) -> None:
        """Emit the scalar math helpers (built once by `math_source`)."""
        src.extend(reindent(self.math_source(), src.depth))

    def math_slots(self) -> int:
        self.math_source()
        return self._math_slots

    def math_source(self) -> Source:
        if getattr(self, "_math_src", None) is None:
            self._math_slots = 0
            self._math_src = Source(1)
            self._build_math(self._math_src)
        return self._math_src

    def _build_math(self, src: Source) -> None:
        """Scalar transcendental functions through the vector unit: one 32-byte block per call."""
        for fn in sorted(self.math):
            pool = Pool("m")
            body = Source(src.depth + 1)
            dom = Domain((), v0="0", count="8")
            em = VecEmitter(body, dom, pool, self.sw, ScalarScope(), self.shapes, {}, inputs=lambda *_: None,
                            features=self.features)
            x = pool.alloc("float32", pinned=True)
            body(f"Duplicate({x.name}, x, 8);")
            out = pool.alloc("float32", pinned=True)
            binary = fn == "pow" or fn in COMPOSED_BINARY
            if binary:
                y = pool.alloc("float32", pinned=True)
                body(f"Duplicate({y.name}, y, 8);")
                em.vlocals = {"xa": x, "xb": y}
                call = Call(fn, (Local("xa", "float32"), Local("xb", "float32")), "float32")
                em.count_uses([call])
                em.root(call, out)
            elif fn in ("exp", "log", "sqrt", "rsqrt", "reciprocal", "abs"):
                api = {"exp": "Exp", "log": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "reciprocal": "Reciprocal",
                       "abs": "Abs"}[fn]
                body(f"{api}({out.name}, {x.name}, 8);")
            else:
                em.compose(fn, out, x)
            body("XbSync<HardEvent::V_S>();")
            body(f"return {out.name}.GetValue(0);")
            params = "float x, float y" if binary else "float x"
            with src.block(f"__aicore__ inline float Math{camel(fn)}({params})"):
                for d in pool.declarations("mathBuf", str(MATH_SLOT)):
                    src(d)
                src("XbSync<HardEvent::S_V>();")
                src.extend(body)
            self._math_slots = max(getattr(self, "_math_slots", 0), pool.count)

    def math_item(self) -> list[UbItem]:
        if not self.math:
            return []
        return [UbItem("mathBuf", "TBuf", "VECCALC", 1, 0, MATH_SLOT * self.math_slots())]

    def entry_source(self, src: Source, init_args: list[str]) -> None:
        params = ", ".join([f"GM_ADDR {param(b)}" for b in self.args()] + ["GM_ADDR workspace", "GM_ADDR tiling"])
        with src.block(f'extern "C" __global__ __aicore__ void {self.entry}({params})'):
            src(f"{self.struct} t;")
            src("XbCopyTiling(&t, tiling);")
            self.entry_prologue(src)
            src(f"{self.cls} op;")
            src(f"op.Init({', '.join(init_args)});")
            src("op.Process();")

    def entry_prologue(self, src: Source) -> None:
        pass

    def args(self) -> list[str]:
        return list(self.gm)

    def struct_source(self, src: Source, fields: list[tuple[str, str]], cube: bool = False) -> None:
        src(f"// Tiling of {self.entry}: computed on the host by {self.entry}_tiling(), copied into the kernel "
            "from GM.")
        with src.block(f"struct {self.struct}", "};"):
            if cube:
                src("TCubeTiling cube;              // Matmul tiling (base blocks, L1 depths, single-core shape)")
            width = max(len(n) for n, _ in fields) + 1
            for n, c in fields:
                src(f"uint32_t {(n + ';').ljust(width + 1)}  // {c}")


def plus(a: str, b: str) -> str:
    return b if a == "0" else f"{a} + {b}"


class Block:
    """A bare `{ ... }` scope."""

    def __init__(self, src: Source):
        self.src = src

    def __enter__(self):
        self.src("{")
        self.src.depth += 1

    def __exit__(self, *a):
        self.src.depth -= 1
        self.src("}")


def storage_dtype(dtype: str) -> str:
    return "uint8" if dtype == "bool" else dtype


def init_value(kind: str, dtype: str) -> str:
    if kind == "sum":
        return lit(0, dtype)
    if kind == "prod":
        return lit(1, dtype)
    if is_float(dtype):
        return "(-XB_INF)" if kind == "max" else "XB_INF"
    if dtype == "bool":
        return lit(kind != "max", dtype)
    info = np.iinfo(dtype)
    return lit(int(info.min) if kind == "max" else int(info.max), dtype)


def accumulate_api(kind: str) -> str:
    return {"sum": "Add", "prod": "Mul", "max": "Max", "min": "Min"}[kind]


RESERVED = {"t", "tiling", "workspace", "op", "blk", "pipe", "len", "v0", "i", "j", "x", "y"}


def param(buf: str) -> str:
    p = ident(buf)
    return p + "_" if p in RESERVED else p


def decode(src: Source, flat: str, axes: list[Axis], names: dict[str, str], declare: bool = False) -> None:
    """Assign the coordinates of row-major index `flat` over `axes` to `names[axis]`."""
    for i, a in enumerate(axes):
        inner = prod(b.extent for b in axes[i + 1:])
        if a.extent == 1:
            v = "0"
        elif i == 0:
            v = f"{flat} / {inner}" if inner > 1 else flat
        else:
            v = f"({flat} / {inner}) % {a.extent}" if inner > 1 else f"{flat} % {a.extent}"
        src(f"{'const int64_t ' if declare else ''}{names[a.name]} = {v};")


def used_decls(decls: list[str], body: Source) -> list[str]:
    text = body.text()
    return [d for d in decls if re.search(r"\b" + re.escape(d.split()[1]) + r"\b", text)]


def reindent(s: Source, depth: int) -> Source:
    out = Source(depth)
    base = min((len(line) - len(line.lstrip()) for line in s.lines if line.strip()), default=0)
    for line in s.lines:
        out.lines.append(("    " * depth + line[base:]) if line.strip() else "")
    return out


class VectorKernelGen(KernelGen):
    """Common layout of the vector kernels: members, InitBuffer calls from the UB plan, ramp and math buffers."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.pool = Pool()
        self.slot_elem = 2
        self.T = 0

    def scalar_members(self) -> list[str]:
        return []

    def calc_item(self) -> list[UbItem]:
        if not self.pool.count:
            return []
        self.slot_elem = max(2, max((SIZE[dt] for (_, dt) in self.pool.views), default=2))
        se = self.slot_elem
        return [UbItem("calcBuf", "TBuf", "VECCALC", 1, 0, fn=lambda T, n=self.pool.count: n * align(T * se, 256))]

    def ramp_item(self) -> list[UbItem]:
        return [UbItem("rampBuf", "TBuf", "VECCALC", 1, 4)] if self.features.ramp else []

    def buffers_init(self, src: Source, queues: list[tuple[str, str, int]]) -> None:
        for q, _pos, size in queues:
            src(f"pipe.InitBuffer({q}, BUFFER_NUM, t.tileLength * {size});")
        if self.pool.count:
            src(f"pipe.InitBuffer(calcBuf, {self.pool.count} * t.slotBytes);")
        if self.features.ramp:
            src("pipe.InitBuffer(rampBuf, t.tileLength * sizeof(float));")
            src("rampTile = rampBuf.Get<float>();")
            with src.block("for (uint32_t r = 0; r < t.tileLength; ++r)"):
                src("rampTile.SetValue(r, static_cast<float>(r));")
            src("XbSync<HardEvent::S_V>();")
        if self.math:
            src(f"pipe.InitBuffer(mathBuf, {MATH_SLOT * self.math_slots()});")

    def buffer_members(self, queues: list[tuple[str, str, int]]) -> list[str]:
        out = ["TPipe pipe;"]
        for q, pos, _ in queues:
            out.append(f"TQue<QuePosition::{pos}, BUFFER_NUM> {q};")
        if self.pool.count:
            out.append("TBuf<QuePosition::VECCALC> calcBuf;")
        if self.features.ramp:
            out.append("TBuf<QuePosition::VECCALC> rampBuf;")
            out.append("LocalTensor<float> rampTile;")
        if self.math:
            out.append("TBuf<QuePosition::VECCALC> mathBuf;")
        return out

    def budget(self) -> int:
        return self.pw.ub_bytes - (SELECT_RESERVE if self.features.select else 0)

    def choose_tile(self, items: list[UbItem], want: int, need: int = ALIGN) -> int:
        """Fit the tile length: the schedule's (or the default) length, shrunk until the plan fits the UB;
        refused with the numbers when not even `need` elements fit."""
        given = int(self.sched.get("tile_length", 0) or 0)
        cap = align(max(given, 1), ALIGN) if given else align(want, ALIGN)
        T = fit_tile(items, self.budget(), cap, need)
        if T == 0:
            n = align(need, ALIGN)
            raise BackendError(
                f"kernel {self.k.name}: a tile of {n} elements needs {ub_total(items, n)} bytes of UB "
                f"({plan_text(items, n)}{', plus 8192 kept free for Select' if self.features.select else ''}); "
                f"the UB has {self.pw.ub_bytes} bytes",
                hint="use buffer_num=1, or a smaller row_mode/tile_length (row_mode='stream' splits rows)")
        if given and align(given, ALIGN) > T:
            self.notes.append(f"tile_length {given} shrunk to {T}: {ub_total(items, align(given, ALIGN))} bytes "
                              f"of UB needed > {self.budget()} available")
        return T

    def plan(self, items: list[UbItem], T: int) -> dict[str, Any]:
        return {
            "tile_length": T, "buffer_num": self.buffer_num,
            "ub": {i.name: {"kind": i.kind, "position": i.position, "num": i.num, "bytes": i.bytes(T),
                            "total": i.num * i.bytes(T)} for i in items},
            "ub_total": ub_total(items, T), "ub_budget": self.pw.ub_bytes,
            "ub_reserved_for_select": SELECT_RESERVE if self.features.select else 0,
            "scalar_path": list(self.features.gathers), "notes": list(self.notes),
        }


def finish(gen: VectorKernelGen) -> tuple[Source, Launch]:
    src, launch = gen.generate()
    launch.helpers = set(gen.sw.helpers)
    return src, launch
