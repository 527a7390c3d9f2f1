"""The x86 CPUID instruction, executed by xbench itself (an LLVM inline-assembly intrinsic), and the data
cache geometry it describes: independent of the kernel's sysfs and of installed tools.

Caches are enumerated by the deterministic cache parameters leaf (4 on Intel, 0x8000001D on AMD with topology
extensions, the same layout): per sub-leaf, type and level in EAX, line size, partitions and ways in EBX, sets
in ECX. Under a hypervisor the last level may describe the host's whole cache, so callers comparing with the
operating system's view should keep to L1 and L2.
"""
from __future__ import annotations

import functools
import platform

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

_AMD_CACHE_LEAF, _INTEL_CACHE_LEAF = 0x8000001D, 4


def available() -> bool:
    """Whether this machine is x86-64 (CPUID is an x86 instruction)."""
    return platform.machine().lower() in ("x86_64", "amd64")


@intrinsic
def _cpuid(typingctx, leaf, sub):
    if leaf != types.uint32 or sub != types.uint32:
        return None
    out = types.UniTuple(types.uint32, 4)

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([i32] * 4), [i32, i32]), "cpuid",
                           "={eax},={ebx},={ecx},={edx},{eax},{ecx}", side_effect=True)
        regs = builder.call(asm, args)
        return context.make_tuple(builder, out, [builder.extract_value(regs, i) for i in range(4)])

    return out(leaf, sub), codegen


@functools.cache
def _compiled():
    import llvmlite.binding as ll
    import numba

    ll.initialize_native_asmparser()     # the machine-code emitter parses the inline assembly

    @numba.njit(cache=False)
    def run(leaf, sub):
        return _cpuid(leaf, sub)

    return run


def cpuid(leaf: int, sub: int = 0) -> tuple[int, int, int, int]:
    """(EAX, EBX, ECX, EDX) of CPUID for `leaf` and sub-leaf `sub`."""
    if not available():
        raise RuntimeError(f"xbench: CPUID is an x86 instruction; this machine is {platform.machine()}")
    import numpy as np
    return tuple(int(r) for r in _compiled()(np.uint32(leaf), np.uint32(sub)))


def vendor() -> str:
    """'GenuineIntel', 'AuthenticAMD', ... (leaf 0: EBX, EDX, ECX)."""
    _, b, c, d = cpuid(0)
    return b"".join(r.to_bytes(4, "little") for r in (b, d, c)).decode("ascii", "replace")


def data_caches() -> dict[int, tuple[int, int, int]]:
    """{level: (size bytes, line bytes, ways)} of the data and unified caches; {} where the CPU does not
    enumerate them."""
    if vendor() == "AuthenticAMD":
        top, leaf = cpuid(0x80000000)[0], _AMD_CACHE_LEAF
        if top < leaf or not cpuid(0x80000001)[2] >> 22 & 1:       # no topology extensions
            return {}
    else:
        top, leaf = cpuid(0)[0], _INTEL_CACHE_LEAF
        if top < leaf:
            return {}
    out: dict[int, tuple[int, int, int]] = {}
    for sub in range(16):
        a, b, c, _ = cpuid(leaf, sub)
        kind, level = a & 0x1F, a >> 5 & 0x7
        if kind == 0:
            break
        if kind in (1, 3):                                           # data, unified
            line, parts, ways = (b & 0xFFF) + 1, (b >> 12 & 0x3FF) + 1, (b >> 22 & 0x3FF) + 1
            out[level] = (ways * parts * line * (c + 1), line, ways)
    return out
