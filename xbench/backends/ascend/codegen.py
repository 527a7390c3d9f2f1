"""Ascend C source from loop-IR programs, in the official kernel style.

Every loop-IR kernel becomes one or more `extern "C" __global__ __aicore__` entries (a `Kernel*` class with
`Init` and `Process`, `TPipe`, `TQue` double buffering, `GlobalTensor`/`LocalTensor`, `DataCopy`, the count
form of the vector API), a POD tiling struct and a host function that fills it:

- elementwise and small-window reduce kernels (`TileKernel`): the outer index space is split into rows
  (leading axes) and a flattened vector extent (trailing axes); tiles of `tileLength` elements are spread
  over `blockDim` cores and pass CopyIn -> Compute -> CopyOut; reductions inside run as loops of vector
  instructions over the tile;
- row kernels (softmax, layernorm, ...; `RowKernel`): one row per step, kept whole in the UB when it fits
  (ReduceMax/ReduceSum once per statistic), streamed in tiles otherwise (one pass per statistic, one for the
  output);
- contractions (`MatmulKernel`): the Cube through the high-level Matmul API with a host `TCubeTiling`;
  operands that are not plain ND matrices are packed first by a generated vector kernel; epilogues run on the
  vector unit on each core's block of C;
- scans, sorts, scatters and anything the vector forms cannot express (`ScalarKernel`): loops on the scalar
  unit over `GetValue`/`SetValue`, flagged "scalar path".

This module holds the program (preamble, kernel order, the form tried for each kernel, the host half). The
forms live in `tiles.py`, `rows.py`, `matmul.py` and `scalar.py`; what their classes share in `kernelgen.py`;
the UB plan and launch records in `plan.py`; loop-IR stage rewrites in `stages.py`; GM <-> UB copies in
`movement.py`; vector expressions in `vecexpr.py`.
"""
from __future__ import annotations

from ...errors import BackendError
from ...ir.kernel import Kernel, Program, Reduce
from ...ir.schedule import Schedule
from .affine import classify
from .cpp import SCALAR_HELPERS, Source, Unsupported, ctype
from .kernelgen import finish, ident
from .movement import WINDOW_HELPER
from .plan import Launch, prod
from .rows import RowKernel
from .scalar import ScalarKernel
from .stages import walk_loads
from .tiles import TileKernel, domain_and_gathers

# ---- the program ----------------------------------------------------------------------------------------

PREAMBLE = """\
#include "kernel_operator.h"
{matmul}
using namespace AscendC;

constexpr float XB_INF = __builtin_huge_valf();
constexpr float XB_NAN = __builtin_nanf("");

__aicore__ inline uint32_t XbAlign(uint32_t n, uint32_t a) {{ return (n + a - 1) / a * a; }}

// Order two pipes of this core (the scalar unit reading what the vector unit wrote, and so on).
template <HardEvent EVT>
__aicore__ inline void XbSync() {{
    TEventID id = GetTPipePtr()->FetchEventID(EVT);
    SetFlag<EVT>(id);
    WaitFlag<EVT>(id);
}}

// GM -> UB: DataCopy moves whole 32-byte blocks; a count that is not a whole number of blocks uses DataCopyPad.
template <typename T>
__aicore__ inline void CopyGmToUb(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count) {{
    if ((count * sizeof(T)) % 32 == 0) {{
        DataCopy(dst, src, count);
    }} else {{
        DataCopyExtParams params(1, static_cast<uint32_t>(count * sizeof(T)), 0, 0, 0);
        DataCopyPadExtParams<T> pad(false, 0, 0, T());
        DataCopyPad(dst, src, params, pad);
    }}
}}

// UB -> GM, the same way.
template <typename T>
__aicore__ inline void CopyUbToGm(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {{
    if ((count * sizeof(T)) % 32 == 0) {{
        DataCopy(dst, src, count);
    }} else {{
        DataCopyExtParams params(1, static_cast<uint32_t>(count * sizeof(T)), 0, 0, 0);
        DataCopyPad(dst, src, params);
    }}
}}

// The host's tiling struct arrives in GM; copy it word by word into the kernel's stack.
template <typename T>
__aicore__ inline void XbCopyTiling(T* dst, GM_ADDR src) {{
    for (uint32_t i = 0; i < sizeof(T) / sizeof(uint32_t); ++i) {{
        reinterpret_cast<uint32_t*>(dst)[i] = reinterpret_cast<__gm__ uint32_t*>(src)[i];
    }}
}}
"""


HELPERS = {**SCALAR_HELPERS, "window": WINDOW_HELPER}


class ProgramWriter:
    """Generates the Ascend C source of a program: one or more launches per loop-IR kernel."""

    def __init__(self, program: Program, schedules: dict[str, Schedule], *, ub_bytes: int = 196608,
                 vector_cores: int = 48, cube_cores: int = 24, l1_bytes: int = 524288, l0a_bytes: int = 65536,
                 l0b_bytes: int = 65536, l0c_bytes: int = 131072):
        self.l1_bytes, self.l0a_bytes, self.l0b_bytes, self.l0c_bytes = l1_bytes, l0a_bytes, l0b_bytes, l0c_bytes
        self.program = program
        self.schedules = schedules
        self.ub_bytes = ub_bytes
        self.vector_cores = vector_cores
        self.cube_cores = cube_cores
        self.shapes = {n: tuple(b.shape) for n, b in program.buffers.items()}
        self.dtypes = {n: b.dtype for n, b in program.buffers.items()}
        for _n, b in program.buffers.items():
            ctype(b.dtype)
        for k in program.kernels:
            for name, (shape, dt) in k.row_buffers.items():
                self.shapes[name] = tuple(shape)
                self.dtypes[name] = dt
        self.extra: dict[str, tuple[tuple[int, ...], str]] = {}   # workspaces in GM: name -> (shape, dtype)
        self.launches: list[Launch] = []
        self.matmul = False
        self.fallbacks: dict[str, str] = {}

    def workspace(self, name: str, shape: tuple[int, ...], dtype: str) -> str:
        self.extra[name] = (tuple(shape), dtype)
        self.shapes[name] = tuple(shape)
        self.dtypes[name] = dtype
        return name

    def entry_name(self, k: Kernel, suffix: str = "") -> str:
        return ident(f"{self.program.name}_{k.name}{suffix}")

    def write(self) -> tuple[str, list[Launch]]:
        bodies: list[Source] = []
        hosts: list[Source] = []
        for k in self.program.kernels:
            sched = self.schedules.get(k.name, Schedule())
            for src, launch in self.kernel(k, sched):
                bodies.append(src)
                hosts.append(launch.host_source)
                self.launches.append(launch)
        out = Source()
        out("// Ascend C kernels generated by xbench from the loop IR below.")
        out("//")
        for line in self.program.text().splitlines():
            out("// " + line)
        out()
        out.lines.extend(PREAMBLE.format(matmul='#include "lib/matmul_intf.h"' if self.matmul else "")
                         .splitlines())
        helpers = set()
        for launch in self.launches:
            helpers |= launch.helpers
        for h in sorted(helpers):
            out()
            out.lines.extend(HELPERS[h].splitlines())
        for src, launch in zip(bodies, self.launches):
            out()
            out(f"// {'=' * 100}")
            out.extend(src)
            out("#ifdef XBENCH_TWIN")
            out(f"XBENCH_TWIN_LAUNCH({launch.entry})")
            out("#endif")
        out()
        out(f"// {'=' * 100}")
        out("// Host side: each function fills its kernel's tiling struct for a launch on `coreNum` cores and")
        out("// returns the blockDim to launch with.")
        out("#ifndef __CCE_AICORE__")
        for h in hosts:
            out()
            out.extend(h)
        out("#endif  // __CCE_AICORE__")
        return out.text() + "\n", self.launches

    def kernel(self, k: Kernel, sched: Schedule) -> list[tuple[Source, Launch]]:
        entry = self.entry_name(k)
        errors = []
        for make in self.candidates(k, sched):
            saved = (dict(self.extra), self.matmul)
            try:
                result = make(entry)
                return result
            except Unsupported as exc:
                errors.append(str(exc.message))
                self.extra, self.matmul = saved
        self.fallbacks[k.name] = "; ".join(errors)
        gen = ScalarKernel(self, k, sched, entry)
        gen.reason = "; ".join(errors)
        return [gen.generate_all()]

    def candidates(self, k: Kernel, sched: Schedule):
        mode = sched.get("row_mode", "auto")

        def tile(entry):
            return [finish(TileKernel(self, k, sched, entry))]

        def row(m):
            def make(entry):
                return [finish(RowKernel(self, k, sched, entry, m))]
            return make

        def row_auto(entry):
            if mode in ("resident", "stream"):
                return row(mode)(entry)
            try:
                return row("resident")(entry)
            except Unsupported:
                raise
            except BackendError:  # the row does not fit the UB: stream it
                return row("stream")(entry)

        if k.kind == "contract":
            from .matmul import MatmulKernel
            return [lambda entry: MatmulKernel(self, k, sched, entry).generate_all()]
        if k.kind == "row":
            return [row_auto]
        if k.kind == "elementwise":   # with row scratch (stores that loop) it is a row kernel in all but name
            return [tile, row_auto]
        if k.kind == "reduce":
            order = [tile, row_auto] if prefer_tiles(k, self) else [row_auto, tile]
            return order
        return []


def prefer_tiles(k: Kernel, pw: ProgramWriter) -> bool:
    """Reduce kernels: vectorise over the outputs (loops over the reduced axes) or over the reduced axes (one
    output at a time), whichever gathers fewer loads element by element; on a tie, over the outputs when the
    reduced extent is short."""
    if not k.outer:
        return False
    try:
        _, tile_gathers = domain_and_gathers(k, pw)
    except Unsupported:
        return False
    row_gathers = 0
    for s in k.stages:
        axes = tuple(getattr(s, "axes", ()) or ())
        for e in s.exprs():
            for ld, _ in walk_loads(e):
                if ld.buf in pw.shapes and classify(ld, pw.shapes[ld.buf], axes).kind == "gather":
                    row_gathers += 1
    if tile_gathers != row_gathers:
        return tile_gathers < row_gathers
    n = max([prod(a.extent for a in s.axes) for s in k.stages if isinstance(s, Reduce)] + [1])
    return n < 256
