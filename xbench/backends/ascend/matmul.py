"""Contractions on the Cube through the high-level Matmul API.

A `[Contract, epilogue...]` kernel with roles (batch, M, N) becomes: for each unit (batch x M block x N
block) a core calls `SetTensorA/B`, `SetSingleShape` and `IterateAll` into C, then runs the epilogue (bias,
activation, casts) on the vector unit over its own block of C, row by row in tiles. A and B must be ND
matrices in GM (plain or transposed); anything else -- convolution windows, a division fused into an
operand, broadcast batch layouts the API cannot address -- is first packed into a GM workspace by a
generated vector kernel (im2col for convolutions). C goes straight to the output when the epilogue is a
plain store of the right type.
"""
from __future__ import annotations

from ...ir import expr as E
from ...ir.expr import Cast, Expr, Load, Local
from ...ir.kernel import Assign, Axis, Contract, Kernel, Store
from .affine import split, strides
from .cpp import CTYPE, SIZE, ScalarScope, Source, Unsupported, ctype
from .kernelgen import VectorKernelGen, decode, finish, ident, param
from .plan import ALIGN, QUE_LIMIT, SYS_WORKSPACE, Launch, UbItem, align, prod
from .tiles import TileBody, TileKernel

IN_TYPES = ("float16", "float32", "bfloat16")
C_TYPES = {"float32": ("float32",), "float16": ("float16", "float32"), "bfloat16": ("bfloat16", "float32")}


def plain(e: Expr, rows: list[Axis], cols: list[Axis], shapes: dict) -> tuple[str, bool, Expr] | None:
    """(buffer, transposed, base offset) when `e` reads a row-major [rows, cols] matrix (or its transpose)
    at a base that depends only on other axes."""
    if not isinstance(e, Load) or e.dtype not in IN_TYPES:
        return None
    dom = {a.name for a in rows + cols if a.extent > 1}
    ones = {a.name: E.ZERO for a in rows + cols if a.extent == 1}
    flat = E.substitute(E.linear(tuple(e.index), shapes[e.buf]), ones)
    s = split(flat, dom)
    if s is None:
        return None
    coeffs, rest = s
    R, C = prod(a.extent for a in rows), prod(a.extent for a in cols)
    rs, cs = strides(rows), strides(cols)

    def match(rmul: int, cmul: int) -> bool:
        return all(coeffs.get(a.name, 0) == rmul * rs[a.name] for a in rows if a.extent > 1) and \
            all(coeffs.get(a.name, 0) == cmul * cs[a.name] for a in cols if a.extent > 1)
    if match(C, 1):
        return e.buf, False, rest
    if match(1, R):
        return e.buf, True, rest
    return None


def _plus(a: str, b: str) -> str:
    return b if a == "0" else f"{a} + {b}"


def cube_use(c: dict, in_bytes: int) -> dict[str, int]:
    """L0A/L0B/L0C/L1 bytes a TCubeTiling asks for (the formulas the twin checks)."""
    return {"l0a_bytes": c["baseM"] * c["baseK"] * in_bytes * c["dbL0A"],
            "l0b_bytes": c["baseN"] * c["baseK"] * in_bytes * c["dbL0B"],
            "l0c_bytes": c["baseM"] * c["baseN"] * 4 * c["dbL0C"],
            "l1_bytes": (c["baseM"] * c["depthA1"] + c["baseN"] * c["depthB1"]) * c["baseK"] * in_bytes}


class MatmulKernel(VectorKernelGen):
    role = "matmul"

    def __init__(self, pw, k: Kernel, sched, entry: str):
        super().__init__(pw, k, sched, entry)
        if not k.stages or not isinstance(k.stages[0], Contract):
            raise Unsupported("not a contraction kernel")
        c = k.stages[0]
        nb, nm, nn = c.roles
        if nb + nm + nn != len(k.outer):
            raise Unsupported("contraction roles do not cover the outer axes")
        for s in k.stages[1:]:
            if not isinstance(s, (Assign, Store)) or (isinstance(s, Store) and (s.axes or s.scope != "global")):
                raise Unsupported("the epilogue has loops of its own")
        self.c = c
        self.batch = list(k.outer[:nb])
        self.maxes = list(k.outer[nb:nb + nm])
        self.naxes = list(k.outer[nb + nm:])
        self.kaxes = list(c.axes)
        self.B = prod(a.extent for a in self.batch)
        self.M = prod(a.extent for a in self.maxes)
        self.N = prod(a.extent for a in self.naxes)
        self.K = prod(a.extent for a in self.kaxes)
        if c.dtype not in ("float32",):
            raise Unsupported(f"{c.dtype} contractions do not use the Cube here")
        lt, rt = c.lhs.dtype, c.rhs.dtype
        self.in_type = lt if lt == rt and lt in IN_TYPES else "float32"
        self.scope = ScalarScope({a.name: f"{a.name}_" for a in self.batch + self.maxes},
                                 {a.name: (0, a.extent - 1) for a in self.batch + self.maxes})

    # -- operands --------------------------------------------------------------------------------------
    def operand(self, e: Expr, rows: list[Axis], cols: list[Axis], tag: str, out: list):
        """(buffer, transposed, base) of an operand, packing it into a workspace when it is not plain."""
        if e.dtype == self.in_type:
            p = plain(e, rows, cols, self.shapes)
            if p is not None:
                return p
        used = [a for a in self.batch if a.name in E.free_indices(e)]
        axes = used + rows + cols
        ws = self.pw.workspace(f"{self.k.name}_{tag}", tuple(a.extent for a in axes) or (1,), self.in_type)
        val = e if e.dtype == self.in_type else Cast(e, self.in_type)
        store = Store(ws, (), tuple(a.var for a in axes) if axes else (E.ZERO,), val)
        kern = Kernel(f"{self.k.name}_pack_{tag}", "elementwise", tuple(axes), [store])
        gen = TileKernel(self.pw, kern, self.sched, ident(f"{self.entry}_pack_{tag}"))
        gen.role = "pack"
        out.append(finish(gen))
        base = E.linear(tuple(a.var for a in used), tuple(a.extent for a in used)) if used else E.ZERO
        base = E.mul(base, E.const(prod(a.extent for a in rows + cols)))
        return ws, False, base

    def direct(self) -> str | None:
        """The output buffer when the epilogue only stores the accumulator (maybe cast) in [B, M, N] order."""
        st = self.k.stages[1:]
        if len(st) != 1 or not isinstance(st[0], Store):
            return None
        s = st[0]
        v = s.value
        if isinstance(v, Cast):
            v = v.x
        if not (isinstance(v, Local) and v.name == self.c.local):
            return None
        if tuple(s.index) != tuple(a.var for a in self.k.outer):
            return None
        dt = self.pw.dtypes[s.buf]
        if self.shapes[s.buf] != tuple(a.extent for a in self.k.outer) or dt not in C_TYPES[self.in_type]:
            return None
        if isinstance(s.value, Cast) and s.value.dtype != dt:
            return None
        return s.buf

    # -- tiling ----------------------------------------------------------------------------------------
    def base_k(self, ta: bool, tb: bool) -> int:
        """baseK: a multiple of 16 (of C0 = 32 / sizeof(A) when only B is transposed), at most 64 / 128."""
        sa = SIZE[self.in_type]
        kalign = 32 // sa if (not ta and tb) else 16
        return min(align(self.K, kalign), 64 if sa == 4 else 128)

    @property
    def pw_l0a(self) -> int:
        return self.pw.l0a_bytes

    @property
    def pw_l0b(self) -> int:
        return self.pw.l0b_bytes

    @property
    def pw_l0c(self) -> int:
        return self.pw.l0c_bytes

    @property
    def pw_l1(self) -> int:
        return self.pw.l1_bytes

    # -- the kernel ------------------------------------------------------------------------------------
    def generate_all(self) -> list:
        pre: list = []
        a_buf, ta, a_base = self.operand(self.c.lhs, self.maxes, self.kaxes, "a", pre)
        b_buf, tb, b_base = self.operand(self.c.rhs, self.kaxes, self.naxes, "b", pre)
        out_buf = self.direct()
        c_type = self.pw.dtypes[out_buf] if out_buf else "float32"
        c_buf = out_buf or self.pw.workspace(f"{self.k.name}_c", (self.B, self.M, self.N), "float32")
        self.pw.matmul = True
        A, Bn, Cn = self.gm_name(a_buf), self.gm_name(b_buf), self.gm_name(c_buf)
        for base in (a_base, b_base):
            for n in base.walk():
                if isinstance(n, Load):
                    self.gm_name(n.buf)
        body = None
        queues: list = []
        if out_buf is None:
            acc = Load(c_buf, (
                E.linear(tuple(a.var for a in self.batch), tuple(a.extent for a in self.batch)) if self.batch
                else E.ZERO,
                E.linear(tuple(a.var for a in self.maxes), tuple(a.extent for a in self.maxes)) if self.maxes
                else E.ZERO,
                E.linear(tuple(a.var for a in self.naxes), tuple(a.extent for a in self.naxes)) if self.naxes
                else E.ZERO), "float32")
            stages = [s.replace(lambda e: e.map(
                lambda n: acc if isinstance(n, Local) and n.name == self.c.local else None)) for s in self.k.stages[1:]]
            ranges = {a.name: (0, a.extent - 1) for a in self.batch + self.maxes}
            body = TileBody(self, stages, tuple(self.naxes), self.scope, ranges, self.pool)
            body.build()
            queues = body.queues()
            if sum(self.buffer_num for _, p, _ in queues if p == "VECIN") > QUE_LIMIT:
                raise Unsupported("the epilogue reads too many tiles")
        items = [UbItem(q, "TQue", pos, self.buffer_num, sz) for q, pos, sz in queues]
        items += self.calc_item() + self.ramp_item() + self.math_item()
        T = self.choose_tile(items, min(8192, max(ALIGN, self.N))) if body else 0
        self.T = T
        slot_bytes = align(T * self.slot_elem, 256)
        at, ct = CTYPE[self.in_type], CTYPE[c_type]
        src = Source()
        fields = [("blockDim", "cores the launch uses"), ("batch", f"independent matrices ({self.B})"),
                  ("mBlocks", "blocks of singleCoreM rows"), ("nBlocks", "blocks of singleCoreN columns"),
                  ("units", "batch x mBlocks x nBlocks"), ("unitsPerBlock", "units every core takes"),
                  ("extraUnits", "cores [0, extraUnits) take one more"),
                  ("tileLength", "epilogue: elements per vector tile (0: no epilogue)"),
                  ("slotBytes", "epilogue: bytes of one scratch tile in calcBuf")]
        self.struct_source(src, fields, cube=True)
        src()
        src(f"// {self.k.name} (contract): C[{self.B} x {self.M} x {self.N}] = A[M x K] @ B[K x N], K = {self.K}, "
            f"on the Cube ({at} in, {ct} out)" + ("; epilogue on the vector unit" if body else ""))
        with src.block(f"class {self.cls}", "};"):
            src.lines.append("public:")
            src(f"static constexpr int32_t BUFFER_NUM = {self.buffer_num};")
            src(f"using AType = MatmulType<TPosition::GM, CubeFormat::ND, {at}{', true' if ta else ''}>;")
            src(f"using BType = MatmulType<TPosition::GM, CubeFormat::ND, {at}{', true' if tb else ''}>;")
            src(f"using CType = MatmulType<TPosition::GM, CubeFormat::ND, {ct}>;")
            # a row of an ND operand longer than 65535 elements needs the intrinsics check (the Cube's strides
            # are 16-bit)
            wide = (not ta and self.K > 65535) or (ta and self.M > 65535) or (not tb and self.N > 65535) or \
                (tb and self.K > 65535)
            if wide:
                src("static constexpr MatmulConfig MM_CFG = {true, false, false, 0, 0, 0, true};  // intrinsicsCheck")
            src(f"__aicore__ inline {self.cls}() {{}}")
            init_params = ", ".join([f"GM_ADDR {param(b)}" for b in self.gm] + [f"const {self.struct}& tiling"])
            with src.block(f"__aicore__ inline void Init({init_params})"):
                src("t = tiling;")
                src("const uint32_t blk = GetBlockIdx();")
                src("unitCount = t.unitsPerBlock + (blk < t.extraUnits ? 1 : 0);")
                src("firstUnit = blk * t.unitsPerBlock + (blk < t.extraUnits ? blk : t.extraUnits);")
                for b in self.gm:
                    src(f"{ident(b)}Gm.SetGlobalBuffer((__gm__ {ctype(self.pw.dtypes[b])}*){param(b)}, "
                        f"{prod(self.shapes[b])});")
                if body:
                    self.buffers_init(src, queues)
                src("REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t.cube);")
                src(f"mm.SetOrgShape({self.M}, {self.N}, {self.K});")
            with src.block("__aicore__ inline void Process()"):
                with src.block("for (uint32_t i = 0; i < unitCount; ++i)"):
                    src("const uint32_t u = firstUnit + i;")
                    src("const uint32_t per = t.mBlocks * t.nBlocks;")
                    src("const uint32_t bIdx = u / per, mIdx = (u % per) / t.nBlocks, nIdx = (u % per) % t.nBlocks;")
                    src("m0 = mIdx * t.cube.singleCoreM;")
                    src("n0 = nIdx * t.cube.singleCoreN;")
                    src(f"tm = {self.M} - m0 < uint32_t(t.cube.singleCoreM) ? {self.M} - m0 : t.cube.singleCoreM;")
                    src(f"tn = {self.N} - n0 < uint32_t(t.cube.singleCoreN) ? {self.N} - n0 : t.cube.singleCoreN;")
                    decode(src, "int64_t(bIdx)", self.batch, self.scope.idx)
                    if not self.batch:
                        src("(void)bIdx;")
                    sc = self.scope.child()
                    a_off = _plus(self.sw.expr(a_base, sc, src), "m0" if ta else f"m0 * {self.K}")
                    b_off = _plus(self.sw.expr(b_base, sc, src), f"n0 * {self.K}" if tb else "n0")
                    src(f"mm.SetSingleShape(tm, tn, {self.K});")
                    src(f"mm.SetTensorA({A}[{a_off}]{', true' if ta else ''});")
                    src(f"mm.SetTensorB({Bn}[{b_off}]{', true' if tb else ''});")
                    c_off = f"int64_t(bIdx) * {self.M * self.N} + m0 * {self.N} + n0" if self.B > 1 \
                        else f"m0 * {self.N} + n0"
                    src(f"mm.IterateAll({Cn}[{c_off}]);")
                    if body:
                        src("Epilogue();")
                src("mm.End();")
            src.lines.append("private:")
            if body:
                with src.block("__aicore__ inline void Epilogue()"), \
                        src.block("for (uint32_t r = 0; r < tm; ++r)"):
                        decode(src, "int64_t(m0 + r)", self.maxes, self.scope.idx)
                        with src.block("for (uint32_t c = 0; c < tn; c += t.tileLength)"):
                            src("v0 = n0 + c;")
                            src("len = tn - c < t.tileLength ? tn - c : t.tileLength;")
                            src("CopyIn();")
                            src("Compute();")
                            src("CopyOut();")
                TileKernel.functions(self, src, body)
            self.math_helpers(src)
            for m in (self.buffer_members(queues) if body else ["TPipe pipe;"]) + self.gm_members():
                src(m)
            src("Matmul<AType, BType, CType, CType, MM_CFG> mm;" if wide else "Matmul<AType, BType, CType> mm;")
            src(f"{self.struct} t;")
            src("uint32_t firstUnit = 0, unitCount = 0, m0 = 0, n0 = 0, tm = 0, tn = 0, v0 = 0, len = 0;")
            for a in self.batch + self.maxes:
                src(f"int64_t {a.name}_ = 0;")
        src()
        self.entry_source(src, [param(b) for b in self.gm] + ["t"])
        host = Source()
        with host.block(f'extern "C" uint32_t {self.entry}_tiling({self.struct}* t, uint32_t coreNum)'):
            host(f"const int32_t batch = {self.B}, M = {self.M}, N = {self.N}, K = {self.K};")
            host(f"if (coreNum > {self.pw.cube_cores}) coreNum = {self.pw.cube_cores};  // Matmul: one cube core each")
            host("// split C into blocks (multiples of 16) until every core has a unit")
            host("uint32_t mB = 1, nB = 1;")
            host("const uint32_t perBatch = batch >= int32_t(coreNum) || batch == 0 ? 1 : coreNum / batch;")
            with host.block("while (mB * nB * 2 <= perBatch)"):
                host("const uint32_t m = (M + mB - 1) / mB, n = (N + nB - 1) / nB;")
                host("if (m >= n && m >= 32) mB *= 2;")
                host("else if (n >= 32) nB *= 2;")
                host("else if (m >= 32) mB *= 2;")
                host("else break;")
            host("int32_t singleM = ((M + mB - 1) / mB + 15) / 16 * 16, singleN = ((N + nB - 1) / nB + 15) / 16 * 16;")
            host("if (singleM > M) singleM = M;")
            host("if (singleN > N) singleN = N;")
            host("if (singleM < 1) singleM = 1;  // an empty M or N: no blocks (and no division by 0)")
            host("if (singleN < 1) singleN = 1;")
            host("t->mBlocks = (M + singleM - 1) / singleM;")
            host("t->nBlocks = (N + singleN - 1) / singleN;")
            host("t->batch = batch;")
            host("t->units = batch * t->mBlocks * t->nBlocks;")
            host("t->blockDim = t->units < coreNum ? t->units : coreNum;")
            host("if (t->blockDim == 0) t->blockDim = 1;")
            host("t->unitsPerBlock = t->units / t->blockDim;")
            host("t->extraUnits = t->units % t->blockDim;")
            host(f"t->tileLength = {T};")
            host(f"t->slotBytes = {slot_bytes if body else 0};")
            sa = SIZE[self.in_type]
            host("// base blocks: at most 128 x 128, L0A/L0B/L0C double-buffered where they fit, L1 up to 4 K-steps")
            host("const int32_t baseM = singleM < 128 ? (singleM + 15) / 16 * 16 : 128;")
            host("const int32_t baseN = singleN < 128 ? (singleN + 15) / 16 * 16 : 128;")
            host(f"const int32_t baseK = {self.base_k(ta, tb)};")
            host("int32_t steps = (K + baseK - 1) / baseK < 4 ? (K + baseK - 1) / baseK : 4;")
            host(f"while (steps > 1 && (baseM + baseN) * baseK * steps * {sa} > {self.pw_l1}) --steps;")
            host("TCubeTiling& c = t->cube;")
            host("c.usedCoreNum = t->blockDim;")
            host("c.M = M; c.N = N; c.Ka = K; c.Kb = K;")
            host("c.singleCoreM = singleM; c.singleCoreN = singleN; c.singleCoreK = K;")
            host("c.baseM = baseM; c.baseN = baseN; c.baseK = baseK;")
            host("c.depthA1 = steps; c.depthB1 = steps;")
            host("c.stepM = 1; c.stepN = 1; c.stepKa = steps; c.stepKb = steps;")
            host("c.isBias = 0; c.transLength = 0; c.iterateOrder = 0;")
            host(f"c.dbL0A = baseM * baseK * {sa} * 2 <= {self.pw_l0a} ? 2 : 1;")
            host(f"c.dbL0B = baseN * baseK * {sa} * 2 <= {self.pw_l0b} ? 2 : 1;")
            host(f"c.dbL0C = baseM * baseN * 4 * 2 <= {self.pw_l0c} ? 2 : 1;")
            host("c.shareMode = 0; c.shareL1Size = 0; c.shareL0CSize = 0; c.shareUbSize = 0;")
            host("c.batchM = 1; c.batchN = 1; c.singleBatchM = 1; c.singleBatchN = 1; c.mxTypePara = 0;")
            host("return t->blockDim;")
        plan = self.plan(items, T) if body else {
            "tile_length": 0, "buffer_num": self.buffer_num, "ub": {}, "ub_total": 0,
            "ub_budget": self.pw.ub_bytes, "ub_reserved_for_select": 0, "scalar_path": [], "notes": []}
        plan.update({
            "form": "matmul", "M": self.M, "N": self.N, "K": self.K, "batch": self.B,
            "a": {"buffer": a_buf, "transposed": ta, "packed": a_buf in self.pw.extra},
            "b": {"buffer": b_buf, "transposed": tb, "packed": b_buf in self.pw.extra},
            "c": {"buffer": c_buf, "dtype": c_type, "direct": out_buf is not None},
            "in_dtype": self.in_type, "in_bytes": SIZE[self.in_type], "epilogue": body is not None,
            "l0a_budget": self.pw_l0a, "l0b_budget": self.pw_l0b, "l0c_budget": self.pw_l0c, "l1_budget": self.pw_l1,
        })
        launch = Launch(self.entry, self.k.name, "matmul", list(self.gm), self.struct, fields, cube=True,
                        cores=self.pw.cube_cores, workspace=SYS_WORKSPACE, plan=plan)
        launch.host_source = host
        launch.helpers = set(self.sw.helpers)
        return pre + [(src, launch)]

    def entry_prologue(self, src: Source) -> None:
        src("KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);")
        src("SetSysWorkspace(workspace);")
        src("if (GetSysWorkSpacePtr() == nullptr) return;")
        if self.B * self.M * self.N == 0:
            src("return;  // an empty C: nothing to compute (the Cube's tiling takes no empty M or N)")

