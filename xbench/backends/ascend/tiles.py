"""The tile form: elementwise and small-window reduce kernels over rows (leading outer axes) x a flattened
vector extent (trailing axes), tiles spread over the cores through CopyIn -> Compute -> CopyOut."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir.expr import Cast, Expr
from ...ir.kernel import Axis, Kernel, Reduce, Store
from .affine import classify
from .cpp import SIZE, ScalarScope, Source, Unsupported, ctype, vec_scalar
from .kernelgen import (
    KernelGen,
    VectorKernelGen,
    decode,
    ident,
    init_value,
    param,
    plus,
    reindent,
    storage_dtype,
    used_decls,
)
from .movement import Inputs, take_all
from .plan import ALIGN, QUE_LIMIT, Launch, UbItem, align, prod
from .stages import forward_stores, inline_assigns, tile_store_base, walk_loads
from .vecexpr import Domain, Pool, Tile, VecEmitter
from .windows import load_window

if TYPE_CHECKING:
    from .codegen import ProgramWriter


class TileBody:
    """The per-tile code of stages [Reduce*, Assign*, Store(no axes)*] evaluated over a vector domain:
    reductions become loops of vector instructions accumulating into a tile."""

    def __init__(self, gen: KernelGen, stages: list, domain: tuple[Axis, ...], scope: ScalarScope,
                 ranges: dict[str, tuple[int, int]], pool: Pool, tag: str = ""):
        self.gen = gen
        self.stages, _ = inline_assigns(stages)
        self.stages = forward_stores(self.stages)
        self.domain = Domain(domain, v0="v0", count="len")
        self.scope = scope
        self.ranges = ranges
        self.pool = pool
        self.tag = tag
        self.budget = [max(1, QUE_LIMIT // gen.buffer_num)]
        self.inputs = Inputs(f"inQueue{tag}", self.budget, f"x{tag}", pool=pool, windows=True)
        self.inner: list[Inputs] = []
        self.outs: list[tuple[Store, str, str, Expr]] = []   # (store, tile, queue, base)
        self.copy_in = Source(2)
        self.compute = Source(2)
        self.copy_out = Source(2)

    def check(self) -> None:
        for s in self.stages:
            if isinstance(s, Reduce):
                if s.kind not in ("sum", "max", "min", "prod") or s.index_local:
                    raise Unsupported(f"{s.kind} reductions have no vector form here")
                if s.dtype not in ("float32", "float16", "int32") or (s.dtype == "int32" and s.kind == "prod"):
                    raise Unsupported(f"{s.kind} over {s.dtype} has no vector form")
            elif isinstance(s, Store):
                if s.axes or s.scope != "global":
                    raise Unsupported("stores with their own loops need the row or scalar form")
                if tile_store_base(s, self.gen.shapes, self.domain.axes) is None:
                    raise Unsupported(f"the store to {s.buf} does not move contiguously along the vector axes")
                if self.gen.pw.dtypes[s.buf] not in ("float32", "float16", "int32", "bfloat16", "bool", "int64",
                                                     "int8", "uint8", "int16"):
                    raise Unsupported(f"no vector store of {self.gen.pw.dtypes[s.buf]}")
            else:
                raise Unsupported(f"{type(s).__name__} stages have no vector form")
        nouts = sum(1 for s in self.stages if isinstance(s, Store))
        if nouts * self.gen.buffer_num > QUE_LIMIT:
            raise Unsupported(f"{nouts} outputs need more than {QUE_LIMIT} VECOUT queue buffers")

    def build(self) -> None:
        self.check()
        g, src, n = self.gen, self.compute, self.domain.count
        vlocals: dict[str, Tile] = {}
        body = Source(2)
        ri = 0
        for s in self.stages:
            if not isinstance(s, Reduce):
                continue
            acc = self.pool.alloc(s.dtype, pinned=True)
            init = init_value(s.kind, s.dtype)
            body(f"Duplicate({acc.name}, {vec_scalar(init, s.dtype)}, {n});")
            inner = Inputs(f"rinQueue{self.tag}{ri}_", self.budget, f"z{self.tag}{ri}_", pool=self.pool,
                           windows=True)
            ri += 1
            self.inner.append(inner)
            scope = self.scope.child()
            copy_scope = None
            ranges = dict(self.ranges)
            opened = 0
            for a in s.axes:
                body(f"for (int64_t {a.name}_ = 0; {a.name}_ < {a.extent}; ++{a.name}_) {{")
                body.depth += 1
                opened += 1
                scope.idx[a.name] = f"{a.name}_"
                scope.ranges[a.name] = ranges[a.name] = (0, a.extent - 1)
            copy_scope = scope.child()
            val = s.body if s.body.dtype == s.dtype else Cast(s.body, s.dtype)
            loop = Source(body.depth)
            em = VecEmitter(loop, self.domain, self.pool, g.sw, scope, g.shapes, {}, inputs=inner,
                            vlocals=vlocals, ranges=ranges, features=g.features)
            em.count_uses([val])
            t = em.value(val)
            tt = em.tile_of(val, t)
            em.accumulate(s.kind, acc, tt)
            em.done(val, t)
            if tt is not t:
                self.pool.release(tt)
            # inner copies: one queue round trip per iteration
            for e in inner.entries.values():
                if e.window is not None:
                    e.copy_window(body, g.sw, copy_scope, g.gm_name(e.buf), "v0", n, f"{e.tile}in")
                    continue
                base = g.sw.expr(e.base, copy_scope, body)
                e.copy_in(body, f"{g.gm_name(e.buf)}[{plus(base, 'v0')}]", n, f"{e.tile}in")
            take_all(body, inner.entries.values())
            body.extend(loop)
            for e in inner.entries.values():
                e.free(body)
            for _ in range(opened):
                body.depth -= 1
                body("}")
            vlocals[s.local] = Tile(acc.name, acc.dtype)
        stores = [s for s in self.stages if isinstance(s, Store)]
        em = VecEmitter(body, self.domain, self.pool, g.sw, self.scope.child(), g.shapes, {}, inputs=self.inputs,
                        vlocals=vlocals, ranges=self.ranges, features=g.features)
        em.count_uses([s.value for s in stores])
        for j, s in enumerate(stores):
            dt = g.pw.dtypes[s.buf]
            tile = f"y{self.tag}{j}"
            queue = f"outQueue{self.tag}{j}"
            self.outs.append((s, tile, queue, tile_store_base(s, g.shapes, self.domain.axes)))
            val = s.value
            if dt == "bool" or dt not in ("float32", "float16", "int32", "bfloat16"):
                t = em.gather(val, ())
                em.copy(Tile(tile, storage_dtype(dt)), t)
                self.pool.release(t)
            else:
                em.root(val, Tile(tile, dt))
        # assemble Compute
        take_all(src, self.inputs.entries.values())
        for s, tile, queue, _ in self.outs:
            c = ctype(g.pw.dtypes[s.buf])
            src(f"LocalTensor<{c}> {tile} = {queue}.AllocTensor<{c}>();")
        src.extend(body)
        for _, tile, queue, _ in self.outs:
            src(f"{queue}.EnQue({tile});")
        for e in self.inputs.entries.values():
            e.free(src)
        # CopyIn / CopyOut
        ci, co = self.copy_in, self.copy_out
        scope = self.scope.child()
        for e in self.inputs.entries.values():
            if e.window is not None:
                e.copy_window(ci, g.sw, scope, g.gm_name(e.buf), "v0", n)
                continue
            base = g.sw.expr(e.base, scope, ci)
            e.copy_in(ci, f"{g.gm_name(e.buf)}[{plus(base, 'v0')}]", n)
        for s, tile, queue, base_e in self.outs:
            c = ctype(g.pw.dtypes[s.buf])
            co(f"LocalTensor<{c}> {tile} = {queue}.DeQue<{c}>();")
            base = g.sw.expr(base_e, self.scope.child(), co)
            co(f"CopyUbToGm({g.gm_name(s.buf)}[{plus(base, 'v0')}], {tile}, {n});")
            co(f"{queue}.FreeTensor({tile});")

    def windows(self) -> list[str]:
        """The shifted windows this body copies in (stencil taps), described."""
        return [e.window.describe() for reg in [self.inputs, *self.inner] for e in reg.entries.values()
                if e.window is not None]

    def queues(self) -> list[tuple[str, str, int]]:
        """(queue, position, bytes per element) of every queue this body uses."""
        out = []
        for e in self.inputs.queued():
            out.append((e.queue, "VECIN", SIZE[e.dtype]))
        for inner in self.inner:
            for e in inner.queued():
                out.append((e.queue, "VECIN", SIZE[e.dtype]))
        for s, _, queue, _ in self.outs:
            out.append((queue, "VECOUT", SIZE[storage_dtype(self.gen.pw.dtypes[s.buf])]))
        return out

    def items(self, slot_elem: int) -> list[UbItem]:
        items = [UbItem(q, "TQue", pos, self.gen.buffer_num, sz) for q, pos, sz in self.queues()]
        n = sum(i.num for i in items if i.position == "VECIN")
        if n > QUE_LIMIT:
            raise Unsupported(f"{n} VECIN queue buffers exceed the {QUE_LIMIT} the hardware has events for")
        return items


class TileKernel(VectorKernelGen):
    """Elementwise and windowed-reduce kernels: rows (leading outer axes) x a flattened vector extent."""

    def __init__(self, pw, k, sched, entry, domain: tuple[Axis, ...] | None = None):
        super().__init__(pw, k, sched, entry)
        if domain is None:
            domain = choose_domain(k, pw)
        self.dom = domain
        self.prefix = list(k.outer[:len(k.outer) - len(domain)])
        self.scope = ScalarScope({a.name: f"{a.name}_" for a in self.prefix},
                                 {a.name: (0, a.extent - 1) for a in self.prefix})
        self.ranges = {a.name: (0, a.extent - 1) for a in self.prefix}
        self.rows = prod(a.extent for a in self.prefix)
        self.V = prod(a.extent for a in domain)

    def generate(self) -> tuple[Source, Launch]:
        body = TileBody(self, self.k.stages, self.dom, self.scope, self.ranges, self.pool)
        body.build()
        queues = body.queues()
        items = [UbItem(q, "TQue", pos, self.buffer_num, sz) for q, pos, sz in queues]
        n_in = sum(self.buffer_num for _, pos, _ in queues if pos == "VECIN")
        if n_in > QUE_LIMIT:
            raise Unsupported(f"{n_in} VECIN buffers exceed {QUE_LIMIT}")
        items += self.calc_item() + self.ramp_item() + self.math_item()
        cores = self.pw.vector_cores
        per_core = -(-self.rows * self.V // cores)
        want = min(8192, max(ALIGN, min(self.V, per_core // 2 if per_core >= 2 * ALIGN else per_core)))
        T = self.choose_tile(items, want)
        self.T = T
        slot_bytes = align(T * self.slot_elem, 256)
        src = Source()
        fields = [("blockDim", "cores the launch uses"), ("tileLength", "elements per tile (a multiple of 128)"),
                  ("tilesPerRow", f"tiles covering the vector extent ({self.V})"),
                  ("lastTileLength", "elements in the last tile of a row"),
                  ("rows", "rows: points of the leading axes " + (", ".join(a.name for a in self.prefix) or "(none)")),
                  ("totalTiles", "rows x tilesPerRow"), ("tilesPerBlock", "tiles every core takes"),
                  ("extraTiles", "cores [0, extraTiles) take one tile more"),
                  ("slotBytes", "bytes of one scratch tile in calcBuf")]
        self.struct_source(src, fields)
        src()
        ax = ", ".join(a.name for a in self.dom) or "(a single point)"
        src(f"// {self.k.name} ({self.k.kind}): vector axes {ax} ({self.V} elements per row), "
            f"{self.rows} rows")
        with src.block(f"class {self.cls}", "};"):
            src.lines.append("public:")
            src(f"static constexpr int32_t BUFFER_NUM = {self.buffer_num};")
            src(f"__aicore__ inline {self.cls}() {{}}")
            init_params = ", ".join([f"GM_ADDR {param(b)}" for b in self.gm] + [f"const {self.struct}& tiling"])
            with src.block(f"__aicore__ inline void Init({init_params})"):
                src("t = tiling;")
                src("const uint32_t blk = GetBlockIdx();")
                src("tileCount = t.tilesPerBlock + (blk < t.extraTiles ? 1 : 0);")
                src("firstTile = blk * t.tilesPerBlock + (blk < t.extraTiles ? blk : t.extraTiles);")
                self.gm_init_params(src)
                self.buffers_init(src, queues)
            with src.block("__aicore__ inline void Process()"), \
                    src.block("for (uint32_t i = 0; i < tileCount; ++i)"):
                    src("Locate(firstTile + i);")
                    src("CopyIn();")
                    src("Compute();")
                    src("CopyOut();")
            src.lines.append("private:")
            with src.block("__aicore__ inline void Locate(uint32_t tile)"):
                src("const uint32_t row = tile / t.tilesPerRow;")
                src("const uint32_t j = tile % t.tilesPerRow;")
                src("v0 = j * t.tileLength;")
                src("len = j + 1 == t.tilesPerRow ? t.lastTileLength : t.tileLength;")
                decode(src, "int64_t(row)", self.prefix, self.scope.idx)
                if not self.prefix:
                    src("(void)row;")
            self.functions(src, body)
            self.math_helpers(src)
            for m in self.buffer_members(queues) + self.gm_members():
                src(m)
            src(f"{self.struct} t;")
            src("uint32_t firstTile = 0, tileCount = 0, v0 = 0, len = 0;")
            for a in self.prefix:
                src(f"int64_t {a.name}_ = 0;")
        src()
        self.entry_source(src, [param(b) for b in self.gm] + ["t"])
        host = Source()
        with host.block(f'extern "C" uint32_t {self.entry}_tiling({self.struct}* t, uint32_t coreNum)'):
            host(f"const uint32_t rows = {self.rows}, extent = {self.V}, tileLength = {T};")
            host("t->tileLength = tileLength;")
            host("t->tilesPerRow = (extent + tileLength - 1) / tileLength;")
            host("t->lastTileLength = extent - (t->tilesPerRow - 1) * tileLength;")
            host("t->rows = rows;")
            host("t->totalTiles = rows * t->tilesPerRow;")
            host("t->blockDim = t->totalTiles < coreNum ? t->totalTiles : coreNum;")
            host("if (t->blockDim == 0) t->blockDim = 1;")
            host("t->tilesPerBlock = t->totalTiles / t->blockDim;")
            host("t->extraTiles = t->totalTiles % t->blockDim;")
            host(f"t->slotBytes = {slot_bytes};  // tileLength x {self.slot_elem} bytes, whole 256-byte repeats")
            host("return t->blockDim;")
        plan = self.plan(items, T)
        plan.update({"form": "tiles", "vector_axes": [a.name for a in self.dom], "vector_extent": self.V,
                     "rows": self.rows, "slots": self.pool.count, "windows": body.windows()})
        launch = Launch(self.entry, self.k.name, self.role, list(self.gm), self.struct, fields,
                        cores=cores, plan=plan)
        launch.host_source = host
        return src, launch

    def gm_init_params(self, src: Source) -> None:
        for b in self.gm:
            c = ctype(self.pw.dtypes[b])
            src(f"{ident(b)}Gm.SetGlobalBuffer((__gm__ {c}*){param(b)}, {prod(self.shapes[b])});")

    def functions(self, src: Source, body: TileBody) -> None:
        decls = self.pool.declarations("calcBuf", "t.slotBytes")
        with src.block("__aicore__ inline void CopyIn()"):
            for d in used_decls(decls, body.copy_in):
                src(d)
            src.extend(reindent(body.copy_in, src.depth))
        with src.block("__aicore__ inline void Compute()"):
            for d in used_decls(decls, body.compute):
                src(d)
            src.extend(reindent(body.compute, src.depth))
        with src.block("__aicore__ inline void CopyOut()"):
            src.extend(reindent(body.copy_out, src.depth))


def choose_domain(k: Kernel, pw: ProgramWriter) -> tuple[Axis, ...]:
    """The trailing outer axes to flatten into the vector extent: fewest gathered loads, then the longest."""
    return domain_and_gathers(k, pw)[0]


def domain_and_gathers(k: Kernel, pw: ProgramWriter) -> tuple[tuple[Axis, ...], int]:
    outer = tuple(k.outer)
    if not outer:
        return (), 0
    stages, _ = inline_assigns(k.stages)
    stages = forward_stores(stages)
    best = None
    for L in range(1, len(outer) + 1):
        dom = outer[len(outer) - L:]
        ok = True
        gathers = 0
        for s in stages:
            if isinstance(s, Store) and tile_store_base(s, pw.shapes, dom) is None:
                ok = False
            for e in s.exprs():
                for ld, guarded in walk_loads(e):
                    if ld.buf not in pw.shapes:
                        continue
                    size = prod(pw.shapes[ld.buf])
                    ranges = {a.name: (0, a.extent - 1) for a in outer}
                    for st in stages:
                        for a in getattr(st, "axes", ()) or ():
                            ranges[a.name] = (0, a.extent - 1)
                    if classify(ld, pw.shapes[ld.buf], dom, guarded, ranges, size).kind == "gather" and \
                            load_window(ld, dom, pw.shapes, ranges) is None:
                        gathers += 1
        if not ok:
            continue
        score = (gathers, -L)
        if best is None or score < best[0]:
            best = (score, dom)
    if best is None:
        raise Unsupported("no trailing axes along which every store is contiguous")
    return best[1], best[0][0]
