"""The scalar path: any kernel as loops on the scalar unit (GetValue / SetValue)."""
from __future__ import annotations

from ...dtypes import is_float
from ...errors import BackendError
from ...ir import expr as E
from ...ir.expr import Call, Cast, Expr, Idx
from ...ir.kernel import Assign, Contract, Reduce, Scan, ScatterAdd, Sort, Store
from .cpp import CTYPE, SCALAR, SIZE, ScalarScope, Source, Unsupported, ctype, lit
from .kernelgen import KernelGen, decode, ident, init_value, param, reindent
from .plan import MATH_SLOT, Launch, UbItem, align, plan_text, prod, ub_total


class ScalarKernel(KernelGen):
    """Any kernel as loops on the scalar unit: loads with GetValue, stores with SetValue (flushed from the data
    cache at the end), transcendental functions through one-block vector helpers. Correct, not fast: the
    resources report lists the kernel under "scalar path"."""

    reason = ""

    def generate_all(self) -> tuple[Source, Launch]:
        src, launch = self.generate()
        launch.helpers = set(self.sw.helpers)
        return src, launch

    def storage(self, code: str, dtype: str) -> str:
        if dtype == "bool":
            return f"static_cast<uint8_t>({code})"
        return f"static_cast<{CTYPE[dtype]}>({code})"

    def generate(self) -> tuple[Source, Launch]:
        k = self.k
        outer = list(k.outer)
        points = prod(a.extent for a in outer)
        serial = any(isinstance(s, ScatterAdd) for s in k.stages)
        scope = ScalarScope({a.name: f"{a.name}_" for a in outer}, {a.name: (0, a.extent - 1) for a in outer})
        body = Source(3)
        row_bytes = 0
        row_decl = []
        for name, (shape, dt) in k.row_buffers.items():
            n = prod(shape)
            self.row_ub[name] = f"row_{ident(name)}"
            row_decl.append(f"LocalTensor<{CTYPE[dt]}> row_{ident(name)} = rowBuf.GetWithOffset<{CTYPE[dt]}>"
                            f"({n}, {row_bytes});")
            row_bytes += align(n * SIZE[dt], 32)
        sort_bytes = 0
        for s in k.stages:
            if isinstance(s, Sort):
                kb = 8 if s.body.dtype == "int64" else 4
                sort_bytes = max(sort_bytes, align(s.axis.extent * kb, 32) + align(s.axis.extent * 4, 32))
        written: list[str] = []
        for s in k.stages:
            self.stage(body, s, scope, written)
        items = self.math_item()
        if row_bytes:
            items.append(UbItem("rowBuf", "TBuf", "VECCALC", 1, 0, row_bytes))
        if sort_bytes:
            items.append(UbItem("sortBuf", "TBuf", "VECCALC", 1, 0, sort_bytes))
        total = ub_total(items, 0)
        if total > self.pw.ub_bytes:
            raise BackendError(f"kernel {k.name}: the scalar path needs {total} bytes of UB ({plan_text(items, 0)});"
                               f" the UB has {self.pw.ub_bytes}")
        src = Source()
        fields = [("blockDim", "cores the launch uses"), ("points", f"outer points ({points})"),
                  ("pointsPerBlock", "points every core takes"),
                  ("extraPoints", "cores [0, extraPoints) take one more")]
        self.struct_source(src, fields)
        src()
        src(f"// {k.name} ({k.kind}): scalar path -- element-by-element loops on the scalar unit"
            + (f" ({self.reason})" if self.reason else ""))
        with src.block(f"class {self.cls}", "};"):
            src.lines.append("public:")
            src(f"__aicore__ inline {self.cls}() {{}}")
            src.depth += 1
            init_params = ", ".join([f"GM_ADDR {param(b)}" for b in self.gm] + [f"const {self.struct}& tiling"])
            with src.block(f"__aicore__ inline void Init({init_params})"):
                src("t = tiling;")
                src("const uint32_t blk = GetBlockIdx();")
                src("count = t.pointsPerBlock + (blk < t.extraPoints ? 1 : 0);")
                src("first = blk * t.pointsPerBlock + (blk < t.extraPoints ? blk : t.extraPoints);")
                for b in self.gm:
                    c = ctype(self.pw.dtypes[b])
                    src(f"{ident(b)}Gm.SetGlobalBuffer((__gm__ {c}*){param(b)}, {prod(self.shapes[b])});")
                if self.math:
                    src(f"pipe.InitBuffer(mathBuf, {MATH_SLOT * self.math_slots()});")
                if row_bytes:
                    src(f"pipe.InitBuffer(rowBuf, {row_bytes});")
                if sort_bytes:
                    src(f"pipe.InitBuffer(sortBuf, {sort_bytes});")
            with src.block("__aicore__ inline void Process()"):
                for d in row_decl:
                    src(d)
                with src.block("for (uint32_t p = first; p < first + count; ++p)"):
                    decode(src, "int64_t(p)", outer, scope.idx, declare=True)
                    src.extend(reindent(body, src.depth))
                for b in written:
                    src(f"DataCacheCleanAndInvalid<{ctype(self.pw.dtypes[b])}, CacheLine::ENTIRE_DATA_CACHE, "
                        f"DcciDst::CACHELINE_OUT>({ident(b)}Gm);")
            src.lines.append("private:")
            self.math_helpers(src)
            src("TPipe pipe;")
            if self.math:
                src("TBuf<QuePosition::VECCALC> mathBuf;")
            if row_bytes:
                src("TBuf<QuePosition::VECCALC> rowBuf;")
            if sort_bytes:
                src("TBuf<QuePosition::VECCALC> sortBuf;")
            for m in self.gm_members():
                src(m)
            src(f"{self.struct} t;")
            src("uint32_t first = 0, count = 0;")
        src()
        self.entry_source(src, [param(b) for b in self.gm] + ["t"])
        host = Source()
        with host.block(f'extern "C" uint32_t {self.entry}_tiling({self.struct}* t, uint32_t coreNum)'):
            host(f"const uint32_t points = {points};")
            host("t->points = points;")
            if serial:
                host("(void)coreNum;")
                host("t->blockDim = 1;  // scatter-add: one core, so no two cores update one element")
            else:
                host("t->blockDim = points < coreNum ? points : coreNum;")
                host("if (t->blockDim == 0) t->blockDim = 1;")
            host("t->pointsPerBlock = points / t->blockDim;")
            host("t->extraPoints = points % t->blockDim;")
            host("return t->blockDim;")
        plan = {"form": "scalar", "scalar_path": [f"{k.name}: whole kernel on the scalar unit"
                                                  + (f" ({self.reason})" if self.reason else "")],
                "ub": {i.name: {"kind": i.kind, "position": i.position, "num": i.num, "bytes": i.bytes(0),
                                "total": i.num * i.bytes(0)} for i in items},
                "ub_total": total, "ub_budget": self.pw.ub_bytes, "buffer_num": 0, "tile_length": 0,
                "notes": list(self.notes)}
        launch = Launch(self.entry, k.name, "main", list(self.gm), self.struct, fields,
                        cores=self.pw.vector_cores, plan=plan)
        launch.host_source = host
        return src, launch

    def loops(self, src: Source, axes, scope: ScalarScope, reverse: bool = False) -> int:
        for a in axes:
            if reverse:
                src(f"for (int64_t {a.name}_ = {a.extent - 1}; {a.name}_ >= 0; --{a.name}_) {{")
            else:
                src(f"for (int64_t {a.name}_ = 0; {a.name}_ < {a.extent}; ++{a.name}_) {{")
            src.depth += 1
            scope.idx[a.name] = f"{a.name}_"
            scope.ranges[a.name] = (0, a.extent - 1)
        return len(axes)

    def close(self, src: Source, n: int) -> None:
        for _ in range(n):
            src.depth -= 1
            src("}")

    def put(self, src: Source, buf: str, index, value: str, scope: ScalarScope) -> None:
        off = self.sw.offset((buf, tuple(index)), scope, src)
        dt = self.pw.dtypes[buf]
        if buf in self.row_ub:
            src(f"{self.row_ub[buf]}.SetValue({off}, {self.storage(value, dt)});")
        else:
            src(f"{self.gm_name(buf)}.SetValue({off}, {self.storage(value, dt)});")

    def stage(self, src: Source, s, scope: ScalarScope, written: list[str]) -> None:
        sw = self.sw
        if isinstance(s, Assign):
            v = sw.expr(s.value, scope, src)
            src(f"const {SCALAR[s.value.dtype]} {s.local}_ = {v};")
            scope.locals[s.local] = f"{s.local}_"
        elif isinstance(s, Store):
            if s.scope == "global" and s.buf not in written:
                written.append(s.buf)
            inner = scope.child()
            n = self.loops(src, s.axes, inner)
            v = sw.expr(s.value, inner, src)
            self.put(src, s.buf, s.index, v, inner)
            self.close(src, n)
        elif isinstance(s, (Reduce, Contract)):
            t = SCALAR[s.dtype]
            kind = s.kind if isinstance(s, Reduce) else "sum"
            init = {"sum": lit(0, s.dtype), "prod": lit(1, s.dtype), "any": "false", "all": "true"}.get(kind)
            if init is None:
                init = init_value("max" if kind in ("max", "argmax") else "min", s.dtype)
            src(f"{t} {s.local}_ = {init};")
            idx = getattr(s, "index_local", None)
            if idx:
                src(f"int64_t {idx}_ = 0, {idx}_pos = 0;")
            inner = scope.child()
            n = self.loops(src, s.axes, inner)
            if isinstance(s, Contract):
                body = Call("mul", (_as(s.lhs, s.dtype), _as(s.rhs, s.dtype)), s.dtype)
            else:
                body = _as(s.body, s.dtype) if kind not in ("any", "all") else s.body
            v = sw.expr(body, inner, src)
            acc = f"{s.local}_"
            if kind == "sum":
                src(f"{acc} += {v};")
            elif kind == "prod":
                src(f"{acc} *= {v};")
            elif kind in ("max", "min"):
                if is_float(s.dtype):
                    sw.helpers.add("minmax")
                    src(f"{acc} = Xb{'Max' if kind == 'max' else 'Min'}({acc}, {v});")
                else:
                    src(f"{acc} = ({v}) {'>' if kind == 'max' else '<'} {acc} ? ({v}) : {acc};")
            elif kind == "any":
                src(f"{acc} = {acc} || ({v});")
            elif kind == "all":
                src(f"{acc} = {acc} && ({v});")
            else:
                op = ">" if kind == "argmax" else "<"
                src(f"const {t} cand = {v};")
                nan = f" || (cand != cand && {acc} == {acc})" if is_float(s.dtype) else ""
                with src.block(f"if (cand {op} {acc}{nan})"):
                    src(f"{acc} = cand;")
                    src(f"{idx}_ = {idx}_pos;")
                src(f"++{idx}_pos;")
            self.close(src, n)
            scope.locals[s.local] = acc
            if idx:
                scope.locals[idx] = f"{idx}_"
        elif isinstance(s, Scan):
            if s.buf not in written:
                written.append(s.buf)
            t = SCALAR[s.dtype]
            init = {"sum": lit(0, s.dtype), "prod": lit(1, s.dtype)}.get(s.kind) or \
                init_value("max" if s.kind == "max" else "min", s.dtype)
            src(f"{t} run = {init};")
            inner = scope.child()
            n = self.loops(src, (s.axis,), inner, reverse=s.reverse)
            v = sw.expr(_as(s.body, s.dtype), inner, src)
            if s.kind == "sum":
                src(f"run += {v};")
            elif s.kind == "prod":
                src(f"run *= {v};")
            elif is_float(s.dtype):
                sw.helpers.add("minmax")
                src(f"run = Xb{'Max' if s.kind == 'max' else 'Min'}(run, {v});")
            else:
                src(f"run = ({v}) {'>' if s.kind == 'max' else '<'} run ? ({v}) : run;")
            self.put(src, s.buf, s.index, "run", inner)
            self.close(src, n)
        elif isinstance(s, Sort):
            self.sort(src, s, scope, written)
        elif isinstance(s, ScatterAdd):
            if s.buf not in written:
                written.append(s.buf)
            inner = scope.child()
            n = self.loops(src, s.axes, inner)
            off = sw.offset((s.buf, tuple(s.index)), inner, src)
            v = sw.expr(s.value, inner, src)
            dt = self.pw.dtypes[s.buf]
            cur = self._load(s.buf, off, dt)
            src(f"{self.gm_name(s.buf)}.SetValue({off}, {self.storage(f'{cur} + ({v})', dt)});")
            self.close(src, n)
        else:
            raise Unsupported(f"internal: no scalar form of {type(s).__name__}")

    def sort(self, src: Source, s: Sort, scope: ScalarScope, written: list[str]) -> None:
        """Stable insertion sort of one row in the UB (keys in their own type -- float for floats, int32 or
        int64 for integers, so no integer is rounded -- and source positions as int32). NaN goes last ascending
        and first descending, as PyTorch."""
        n = s.axis.extent
        if n == 0:                      # empty rows: nothing to sort or write (and no sortBuf)
            return
        for b in (s.values_buf, s.indices_buf):
            if b and b not in written:
                written.append(b)
        bdt = s.body.dtype
        kdt = "float32" if is_float(bdt) else "int64" if bdt == "int64" else "int32"
        kt = ctype(kdt)
        src(f"LocalTensor<{kt}> keys = sortBuf.GetWithOffset<{kt}>({n}, 0);")
        src(f"LocalTensor<int32_t> order = sortBuf.GetWithOffset<int32_t>({n}, {align(n * SIZE[kdt], 32)});")
        inner = scope.child()
        c = self.loops(src, (s.axis,), inner)
        v = self.sw.expr(Cast(s.body, kdt) if bdt != kdt else s.body, inner, src)
        src(f"keys.SetValue({s.axis.name}_, {v});")
        src(f"order.SetValue({s.axis.name}_, static_cast<int32_t>({s.axis.name}_));")
        self.close(src, c)
        op = ">" if s.descending else "<"
        if kdt == "float32":   # key goes before other: NaN after every number ascending, before them descending
            nan = "(key != key && other == other)" if s.descending else "(other != other && key == key)"
            before = f"(key {op} other || {nan})"
        else:
            before = f"(key {op} other)"
        with src.block(f"for (int32_t a = 1; a < {n}; ++a)"):
            src(f"const {kt} key = keys.GetValue(a);")
            src("const int32_t pos = order.GetValue(a);")
            src("int32_t b = a - 1;")
            with src.block("while (b >= 0)"):
                src(f"const {kt} other = keys.GetValue(b);")
                src(f"if (!{before}) break;")
                src("keys.SetValue(b + 1, keys.GetValue(b));")
                src("order.SetValue(b + 1, order.GetValue(b));")
                src("--b;")
            src("keys.SetValue(b + 1, key);")
            src("order.SetValue(b + 1, pos);")
        inner = scope.child()
        c = self.loops(src, (s.axis,), inner)
        a = s.axis.name + "_"
        if s.values_buf:
            dt = self.pw.dtypes[s.values_buf]
            val = self.sw.expr(E.substitute(s.body, {s.axis.name: Idx("src_pos")}), _with_idx(inner, "src_pos"),
                               None)
            src(f"const int64_t src_pos = order.GetValue({a});")
            self.put(src, s.values_buf, s.index, val if dt != "float32" else f"keys.GetValue({a})", inner)
        if s.indices_buf:
            if not s.values_buf:
                src(f"const int64_t src_pos = order.GetValue({a});")
            self.put(src, s.indices_buf, s.index, "src_pos", inner)
        self.close(src, c)


def _with_idx(scope: ScalarScope, name: str) -> ScalarScope:
    s = scope.child()
    s.idx[name] = name
    return s


def _as(e: Expr, dtype: str) -> Expr:
    return e if e.dtype == dtype else Cast(e, dtype)
