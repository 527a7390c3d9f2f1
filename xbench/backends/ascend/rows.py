"""The row form: one outer point (a row) per step, each stage vectorised over its own axes -- kept in the UB
(resident) or streamed in tiles."""
from __future__ import annotations

from ...errors import BackendError
from ...ir.expr import Cast, Expr
from ...ir.kernel import Assign, Reduce, Store
from .affine import classify
from .cpp import SCALAR, SIZE, ScalarScope, Source, Unsupported, ctype, vec_scalar
from .kernelgen import (
    Block,
    VectorKernelGen,
    decode,
    ident,
    init_value,
    param,
    plus,
    reindent,
    used_decls,
)
from .movement import Inputs, take_all
from .plan import ALIGN, QUE_LIMIT, Launch, UbItem, align, prod
from .stages import inline_row_buffers, store_base, walk_loads
from .vecexpr import Domain, Tile, VecEmitter


class RowKernel(VectorKernelGen):
    """One outer point (a row) per step; each stage vectorised over its own axes. `resident`: the row's data,
    scratch rows and outputs stay in the UB for all stages (one GM read per row); `stream`: every stage
    streams its axes in tiles (one pass over GM per statistic, one for the output)."""

    def __init__(self, pw, k, sched, entry, mode: str = "resident"):
        super().__init__(pw, k, sched, entry)
        self.mode = mode
        self.prefix = list(k.outer)
        self.rows = prod(a.extent for a in k.outer)
        self.scope = ScalarScope({a.name: f"{a.name}_" for a in self.prefix},
                                 {a.name: (0, a.extent - 1) for a in self.prefix})
        self.ranges = {a.name: (0, a.extent - 1) for a in self.prefix}
        self.members: list[str] = []
        self.reduce_types: set[str] = set()
        self.stages = list(k.stages) if mode == "resident" else inline_row_buffers(k)
        self.D = max([prod(a.extent for a in getattr(s, "axes", ()) or ()) for s in self.stages] + [1])
        self.budget_ = [max(1, QUE_LIMIT // self.buffer_num)]

    def written_before(self) -> list[set[str]]:
        """For each stage, the GM buffers earlier stages of this kernel wrote."""
        out, seen = [], set()
        for s in self.stages:
            out.append(set(seen))
            if isinstance(s, Store) and s.scope == "global":
                seen.add(s.buf)
        return out

    def check(self) -> None:
        for s, before in zip(self.stages, self.written_before()):
            reads = {ld.buf for e in s.exprs() for ld, _ in walk_loads(e)}
            if self.mode == "resident" and reads & before:
                raise BackendError(f"kernel {self.k.name}: a stage reads {', '.join(sorted(reads & before))}, which "
                                   "an earlier stage writes to GM; such rows are streamed",
                                   hint="use row_mode='stream' (or 'auto')")
            if isinstance(s, Reduce):
                if s.kind not in ("sum", "max", "min") or s.index_local:
                    raise Unsupported(f"{s.kind} row reductions have no vector form here")
                if s.dtype not in ("float32", "float16"):
                    raise Unsupported(f"row reductions over {s.dtype} have no vector form")
            elif isinstance(s, Store):
                if s.scope == "global":
                    dt = self.pw.dtypes[s.buf]
                    if dt not in ("float32", "float16", "int32", "bfloat16"):
                        raise Unsupported(f"no vector row store of {dt}")
                    if s.axes and store_base(s, self.shapes) is None:
                        raise Unsupported(f"the store to {s.buf} is not contiguous along its axes")
            elif not isinstance(s, Assign):
                raise Unsupported(f"{type(s).__name__} stages have no row form")

    def member(self, local: str, dtype: str) -> str:
        name = f"{local}_"
        self.members.append(f"{SCALAR.get(dtype, 'float')} {name} = 0;")
        self.scope.locals[local] = name
        return name

    def reduce_finish(self, src: Source, s: Reduce, t: Tile, count: str) -> None:
        api = {"sum": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin"}[s.kind]
        c = ctype(t.dtype)
        self.reduce_types.add(t.dtype)
        per = 32 // SIZE[t.dtype]
        with Block(src):
            src(f"LocalTensor<{c}> red = reduceBuf.GetWithOffset<{c}>({per}, 0);")
            src(f"LocalTensor<{c}> redTmp = reduceBuf.GetWithOffset<{c}>((reduceBytes - 32) / sizeof({c}), 32);")
            src(f"{api}(red, {t.name}, redTmp, {count});")
            src("XbSync<HardEvent::V_S>();")
            name = self.scope.locals[s.local]
            conv = "static_cast<float>" if t.dtype in ("float16", "bfloat16") else ""
            src(f"{name} = {conv}(red.GetValue(0));")
            if s.kind in ("max", "min"):
                self.nan_check(src, t, count, name)

    def nan_check(self, src: Source, t: Tile, count: str, name: str) -> None:
        """ReduceMax and ReduceMin skip NaN: a row holding one gives NaN (the maximum over a 0/1 NaN mask)."""
        self.features.select = True
        m, f = self.pool.alloc("uint8"), self.pool.alloc(t.dtype)
        for tile in (m, f):
            tc = ctype(tile.dtype)
            src(f"LocalTensor<{tc}> {tile.name} = calcBuf.GetWithOffset<{tc}>(t.slotBytes / sizeof({tc}), "
                f"{self._slot(tile)} * t.slotBytes);")
        src("XbSync<HardEvent::S_V>();")
        src(f"Compare({m.name}, {t.name}, {t.name}, CMPMODE::EQ, XbAlign({count}, {256 // SIZE[t.dtype]}));")
        src(f"Duplicate({f.name}, {vec_scalar('0.0f', t.dtype)}, {count});")
        src(f"Select({f.name}, {m.name}, {f.name}, {vec_scalar('1.0f', t.dtype)}, SELMODE::VSEL_TENSOR_SCALAR_MODE, "
            f"{count});")
        src(f"ReduceMax(red, {f.name}, redTmp, {count});")
        src("XbSync<HardEvent::V_S>();")
        src(f"if (static_cast<float>(red.GetValue(0)) > 0.0f) {name} = XB_NAN;")
        self.pool.release(m)
        self.pool.release(f)

    def reduce_item(self) -> list[UbItem]:
        if not self.reduce_types:
            return []
        return [UbItem("reduceBuf", "TBuf", "VECCALC", 1, 0, fn=lambda T: 32 + 4 * align(-(-T // 64) * 2, 8))]

    def generate(self) -> tuple[Source, Launch]:
        self.check()
        for s in self.stages:
            if isinstance(s, Reduce):
                self.member(s.local, s.dtype)
            elif isinstance(s, Assign):
                self.member(s.local, s.value.dtype)
        fns = Source(1)
        queues = self.resident(fns) if self.mode == "resident" else self.stream(fns)
        items = [UbItem(q, "TQue", pos, self.buffer_num, sz) for q, pos, sz in queues]
        items += self.calc_item() + self.ramp_item() + self.math_item() + self.reduce_item()
        if self.mode == "resident":
            T = self.choose_tile(items, self.D, need=self.D)
            T = align(self.D, ALIGN) if align(self.D, ALIGN) <= T else T
        else:
            T = self.choose_tile(items, min(self.D, 8192))
        self.T = T
        slot_bytes = align(T * self.slot_elem, 256)
        src = Source()
        fields = [("blockDim", "cores the launch uses"), ("rows", f"rows ({self.rows})"),
                  ("rowsPerBlock", "rows every core takes"), ("extraRows", "cores [0, extraRows) take one more"),
                  ("tileLength", "elements per tile" + (" (a whole row)" if self.mode == "resident" else "")),
                  ("slotBytes", "bytes of one scratch tile in calcBuf"),
                  ("reduceBytes", "bytes of reduceBuf: result block and ReduceMax/ReduceSum workspace")]
        self.struct_source(src, fields)
        src()
        src(f"// {self.k.name} ({self.k.kind}): {self.rows} rows, stages over up to {self.D} elements, "
            f"{'each row kept in the UB' if self.mode == 'resident' else 'rows streamed in tiles'}")
        with src.block(f"class {self.cls}", "};"):
            src.lines.append("public:")
            src(f"static constexpr int32_t BUFFER_NUM = {self.buffer_num};")
            src(f"__aicore__ inline {self.cls}() {{}}")
            init_params = ", ".join([f"GM_ADDR {param(b)}" for b in self.gm] + [f"const {self.struct}& tiling"])
            with src.block(f"__aicore__ inline void Init({init_params})"):
                src("t = tiling;")
                src("const uint32_t blk = GetBlockIdx();")
                src("rowCount = t.rowsPerBlock + (blk < t.extraRows ? 1 : 0);")
                src("firstRow = blk * t.rowsPerBlock + (blk < t.extraRows ? blk : t.extraRows);")
                for b in self.gm:
                    c = ctype(self.pw.dtypes[b])
                    src(f"{ident(b)}Gm.SetGlobalBuffer((__gm__ {c}*){param(b)}, {prod(self.shapes[b])});")
                self.buffers_init(src, queues)
                if self.reduce_types:
                    src("pipe.InitBuffer(reduceBuf, t.reduceBytes);")
                    src("reduceBytes = t.reduceBytes;")
            with src.block("__aicore__ inline void Process()"), \
                    src.block("for (uint32_t i = 0; i < rowCount; ++i)"):
                    src("Locate(firstRow + i);")
                    if self.mode == "resident":
                        src("CopyIn();")
                        src("Compute();")
                        src("CopyOut();")
                    else:
                        src("ProcessRow();")
            src.lines.append("private:")
            with src.block("__aicore__ inline void Locate(uint32_t row)"):
                decode(src, "int64_t(row)", self.prefix, self.scope.idx)
                if not self.prefix:
                    src("(void)row;")
            src.extend(reindent(fns, src.depth))
            self.math_helpers(src)
            for m in self.buffer_members(queues) + self.gm_members():
                src(m)
            if self.reduce_types:
                src("TBuf<QuePosition::VECCALC> reduceBuf;")
                src("uint32_t reduceBytes = 0;")
            src(f"{self.struct} t;")
            src("uint32_t firstRow = 0, rowCount = 0, v0 = 0, len = 0;")
            for a in self.prefix:
                src(f"int64_t {a.name}_ = 0;")
            for m in self.members:
                src(m)
        src()
        self.entry_source(src, [param(b) for b in self.gm] + ["t"])
        host = Source()
        with host.block(f'extern "C" uint32_t {self.entry}_tiling({self.struct}* t, uint32_t coreNum)'):
            host(f"const uint32_t rows = {self.rows};")
            host("t->rows = rows;")
            host("t->blockDim = rows < coreNum ? rows : coreNum;")
            host("if (t->blockDim == 0) t->blockDim = 1;")
            host("t->rowsPerBlock = rows / t->blockDim;")
            host("t->extraRows = rows % t->blockDim;")
            host(f"t->tileLength = {T};")
            host(f"t->slotBytes = {slot_bytes};")
            red = self.reduce_item()
            host(f"t->reduceBytes = {red[0].bytes(T) if red else 0};")
            host("return t->blockDim;")
        plan = self.plan(items, T)
        plan.update({"form": "row", "row_mode": self.mode, "rows": self.rows, "row_extent": self.D,
                     "slots": self.pool.count})
        launch = Launch(self.entry, self.k.name, self.role, list(self.gm), self.struct, fields,
                        cores=self.pw.vector_cores, plan=plan)
        launch.host_source = host
        return src, launch

    # -- resident: CopyIn the whole row once, every stage on it, CopyOut
    def resident(self, fns: Source) -> list[tuple[str, str, int]]:
        reg = Inputs("inQueue", self.budget_, "x", pool=self.pool)
        row_tiles: dict[str, Tile] = {}
        for name, (_shape, dt) in self.k.row_buffers.items():
            row_tiles[name] = self.pool.alloc(dt, pinned=True)
            self.row_ub[name] = row_tiles[name].name
        reg.row_tiles = row_tiles
        outs: list[tuple[Store, str, str, Expr, int]] = []
        body = Source(2)
        for s in self.stages:
            axes = tuple(getattr(s, "axes", ()) or ())
            D = prod(a.extent for a in axes)
            dom = Domain(axes, v0="0", count=str(D))
            if isinstance(s, Assign):
                body(f"{self.scope.locals[s.local]} = {self.sw.expr(s.value, self.scope.child(), body)};")
                continue
            em = VecEmitter(body, dom, self.pool, self.sw, self.scope.child(), self.shapes, {}, inputs=reg,
                            ranges=self.ranges, features=self.features)
            if isinstance(s, Reduce):
                val = s.body if s.body.dtype == s.dtype else Cast(s.body, s.dtype)
                em.count_uses([val])
                op = em.value(val)
                t = em.tile_of(val, op)
                self.reduce_finish(body, s, t, str(D))
                em.done(val, op)
                if t is not op:
                    self.pool.release(t)
            elif s.scope == "row":
                em.count_uses([s.value])
                em.root(s.value, row_tiles[s.buf])
            else:
                j = len(outs)
                dt = self.pw.dtypes[s.buf]
                outs.append((s, f"y{j}", f"outQueue{j}", store_base(s, self.shapes), D))
                em.count_uses([s.value])
                em.root(s.value, Tile(f"y{j}", dt))
        if len(outs) * self.buffer_num > QUE_LIMIT:
            raise Unsupported(f"{len(outs)} row outputs need more than {QUE_LIMIT} VECOUT queue buffers")
        # the row loads: every stage's contiguous load, once per row
        extent_of: dict[tuple, int] = {}
        for s in self.stages:
            axes = tuple(getattr(s, "axes", ()) or ())
            for e in s.exprs():
                for ld, _guarded in walk_loads(e):
                    if ld.buf in self.shapes and ld.buf not in self.k.row_buffers:
                        acc = classify(ld, self.shapes[ld.buf], axes)
                        if acc.kind == "contiguous":
                            key = (ld.buf, acc.base, ld.dtype)
                            extent_of[key] = max(extent_of.get(key, 0), prod(a.extent for a in axes))
        decls = self.pool.declarations("calcBuf", "t.slotBytes")
        copy_in = Source(2)
        scope = self.scope.child()
        for e in reg.entries.values():
            base = self.sw.expr(e.base, scope, copy_in)
            e.copy_in(copy_in, f"{self.gm_name(e.buf)}[{base}]", str(extent_of.get(e.key, self.D)))
        with fns.block("__aicore__ inline void CopyIn()"):
            for d in used_decls(decls, copy_in):
                fns(d)
            fns.extend(reindent(copy_in, fns.depth))
        with fns.block("__aicore__ inline void Compute()"):
            take_all(fns, reg.entries.values())
            for s, tile, queue, _, _ in outs:
                c = ctype(self.pw.dtypes[s.buf])
                fns(f"LocalTensor<{c}> {tile} = {queue}.AllocTensor<{c}>();")
            for d in used_decls(decls, body):
                fns(d)
            fns.extend(reindent(body, fns.depth))
            for _, tile, queue, _, _ in outs:
                fns(f"{queue}.EnQue({tile});")
            for e in reg.entries.values():
                e.free(fns)
        with fns.block("__aicore__ inline void CopyOut()"):
            for s, tile, queue, base_e, D in outs:
                c = ctype(self.pw.dtypes[s.buf])
                fns(f"LocalTensor<{c}> {tile} = {queue}.DeQue<{c}>();")
                base = self.sw.expr(base_e, self.scope.child(), fns)
                fns(f"CopyUbToGm({self.gm_name(s.buf)}[{base}], {tile}, {D});")
                fns(f"{queue}.FreeTensor({tile});")
        qs = [(e.queue, "VECIN", SIZE[e.dtype]) for e in reg.queued()]
        qs += [(q, "VECOUT", SIZE[self.pw.dtypes[s.buf]]) for s, _, q, _, _ in outs]
        return qs

    # -- stream: each stage loops over its axes in tiles
    def stream(self, fns: Source) -> list[tuple[str, str, int]]:
        in_sizes: dict[int, int] = {}
        out_sizes: dict[int, int] = {}
        calls = Source(2)
        decls_later: list[tuple[Source, Source]] = []
        before_all = self.written_before()
        for si, s in enumerate(self.stages):
            axes = tuple(getattr(s, "axes", ()) or ())
            D = prod(a.extent for a in axes)
            if isinstance(s, Assign):
                calls(f"{self.scope.locals[s.local]} = {self.sw.expr(s.value, self.scope.child(), calls)};")
                continue
            reg = Inputs("inQueue", [max(1, QUE_LIMIT // self.buffer_num)], "x", pool=self.pool)
            dom = Domain(axes, v0="v0", count="len")
            body = Source(2)
            em = VecEmitter(body, dom, self.pool, self.sw, self.scope.child(), self.shapes, {}, inputs=reg,
                            ranges=self.ranges, features=self.features)
            out = None
            acc_tile = None
            if isinstance(s, Reduce):
                val = s.body if s.body.dtype == s.dtype else Cast(s.body, s.dtype)
                acc_tile = self.pool.alloc(s.dtype, pinned=True)
                em.count_uses([val])
                op = em.value(val)
                t = em.tile_of(val, op)
                em.accumulate(s.kind, acc_tile, t)
                em.done(val, op)
                if t is not op:
                    self.pool.release(t)
            else:
                dt = self.pw.dtypes[s.buf]
                out = (f"y{si}", "outQueue0", store_base(s, self.shapes), dt)
                out_sizes[0] = max(out_sizes.get(0, 0), SIZE[dt])
                em.count_uses([s.value])
                em.root(s.value, Tile(out[0], dt))
            for j, e in enumerate(reg.queued()):
                in_sizes[j] = max(in_sizes.get(j, 0), SIZE[e.dtype])
            # the stage's functions
            ci_body, cp, co = Source(2), Source(1), Source(1)
            scope = self.scope.child()
            for e in reg.entries.values():
                base = self.sw.expr(e.base, scope, ci_body)
                e.copy_in(ci_body, f"{self.gm_name(e.buf)}[{plus(base, 'v0')}]", "len")
            pre = Source(2)
            take_all(pre, reg.entries.values())
            if out:
                pre(f"LocalTensor<{ctype(out[3])}> {out[0]} = {out[1]}.AllocTensor<{ctype(out[3])}>();")
            post = Source(2)
            if out:
                post(f"{out[1]}.EnQue({out[0]});")
            for e in reg.entries.values():
                e.free(post)
            decls_later.append((cp, pre, body, post, si, ci_body))
            if out:
                with co.block(f"__aicore__ inline void CopyOut{si}()"):
                    c = ctype(out[3])
                    co(f"LocalTensor<{c}> {out[0]} = {out[1]}.DeQue<{c}>();")
                    base = self.sw.expr(out[2], self.scope.child(), co)
                    co(f"CopyUbToGm({self.gm_name(s.buf)}[{plus(base, 'v0')}], {out[0]}, len);")
                    co(f"{out[1]}.FreeTensor({out[0]});")
            # the stage's loop in ProcessRow
            calls(f"// stage {si}: {s.text()[:100]}")
            reads = {ld.buf for e in s.exprs() for ld, _ in walk_loads(e)}
            if reads & before_all[si]:
                calls("XbSync<HardEvent::MTE3_MTE2>();  // earlier stages wrote what this one reads")
            with Block(calls):
                if acc_tile is not None:
                    calls(f"LocalTensor<{ctype(s.dtype)}> {acc_tile.name} = calcBuf.GetWithOffset<{ctype(s.dtype)}>"
                          f"(t.slotBytes / sizeof({ctype(s.dtype)}), {self._slot(acc_tile)} * t.slotBytes);")
                    calls(f"Duplicate({acc_tile.name}, {vec_scalar(init_value(s.kind, s.dtype), s.dtype)}, "
                          "t.tileLength);")
                calls(f"const uint32_t tiles = ({D} + t.tileLength - 1) / t.tileLength;")
                with calls.block("for (uint32_t j = 0; j < tiles; ++j)"):
                    calls("v0 = j * t.tileLength;")
                    calls(f"len = j + 1 == tiles ? {D} - v0 : t.tileLength;")
                    calls(f"CopyIn{si}();")
                    calls(f"Compute{si}();")
                    if out:
                        calls(f"CopyOut{si}();")
                if acc_tile is not None:
                    self.reduce_finish(calls, s, acc_tile, f"({D} < t.tileLength ? {D} : t.tileLength)")
                    self.pool.pinned.discard(self._slot(acc_tile))
                    self.pool.release(Tile(acc_tile.name, acc_tile.dtype, (self._slot(acc_tile),)))
            fns.extend(co)
        decls = self.pool.declarations("calcBuf", "t.slotBytes")
        for cp, pre, body, post, si, ci_body in decls_later:
            with fns.block(f"__aicore__ inline void CopyIn{si}()"):
                for d in used_decls(decls, ci_body):
                    fns(d)
                fns.extend(reindent(ci_body, fns.depth))
            with cp.block(f"__aicore__ inline void Compute{si}()"):
                cp.extend(reindent(pre, cp.depth))
                for d in used_decls(decls, body):
                    cp(d)
                cp.extend(reindent(body, cp.depth))
                cp.extend(reindent(post, cp.depth))
            fns.extend(cp)
        with fns.block("__aicore__ inline void ProcessRow()"):
            fns.extend(reindent(calls, fns.depth))
        qs = [(f"inQueue{j}", "VECIN", sz) for j, sz in sorted(in_sizes.items())]
        qs += [(f"outQueue{j}", "VECOUT", sz) for j, sz in sorted(out_sizes.items())]
        return qs

    def _slot(self, t: Tile) -> int:
        for (slot, _dt), name in self.pool.views.items():
            if name == t.name:
                return slot
        raise KeyError(t.name)
