// xbench Ascend C twin -- a clean-room, header-only CPU emulation of the Ascend C API subset xbench emits.
//
// Generated (or hand-written) Ascend C kernels include this header under the name real kernels use, compile
// with g++ into a shared library, and run through ctypes on numpy buffers: one host thread per block index,
// every hardware rule checked, the work counted. Written from the public API descriptions only.
//
// ===================================================================================== launch convention
// The source defines each kernel in the official direct-launch style, with every parameter a GM pointer:
//
//     extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling)
//     { ... }
//     #ifdef XBENCH_TWIN                       // defined by this header, absent under a CANN toolkit
//     XBENCH_TWIN_LAUNCH(add_custom)           // exports xbench_launch_add_custom for the runner
//     #endif
//
// Tiling travels through GM as the last GM_ADDR argument, as the official direct-launch samples do: the kernel
// copies it into a local struct (e.g. `for (i...) ((uint32_t*)&t)[i] = ((__gm__ uint32_t*)tiling)[i];`).
// Reasons: one uniform ABI (an array of pointers) for every kernel, the host passes plain bytes, the twin
// bounds-checks the tiling like any GM buffer, and the same source builds with CANN. (A trivially copyable
// struct parameter passed by value also works -- e.g. the newer official style
// `__global__ __cube__ void mm(GM_ADDR a, GM_ADDR b, GM_ADDR c, AscendC::tiling::TCubeTiling tiling)` --
// the runner then passes its bytes; `__vector__`, `__cube__` and `__mix__(c, v)` qualifiers are accepted.)
//
//     extern "C" int xbench_launch_<name>(uint32_t blockDim, void** args, const uint64_t* argBytes,
//                                         uint32_t nargs, const XbenchTwinConfig* cfg,
//                                         XbenchTwinCounters* counters /* blockDim entries */,
//                                         XbenchTwinStatus* status);
// runs blocks 0..blockDim-1 on min(blockDim, cfg->num_threads or hardware threads) threads, each block with
// its own Unified Buffer (cfg->ub_bytes, filled with cfg->ub_fill_byte) and thread-local block index, and
// returns 0, or 1 (a hardware rule broken: status holds the lowest failing block, the rule id and a message),
// 2 (the kernel threw another C++ exception), 3 (wrong arguments). GM pointers handed to SetGlobalBuffer must
// lie inside the argument buffers (or GetSysWorkSpacePtr()'s workspace). Kernels must keep no state in
// globals or statics (blocks run concurrently).
//
// ===================================================================================== supported API
// namespace AscendC (all names as in the real API; Atlas A2 / 910B behaviour and data types):
//   GetBlockIdx, GetBlockNum, GetSubBlockIdx, GetSysWorkSpacePtr, SetSysWorkspace, GetUBSizeInBytes
//   PipeBarrier<pipe_t>, SetFlag<HardEvent>/WaitFlag<HardEvent>(id), TPipe::FetchEventID/AllocEventID,
//       DataCacheCleanAndInvalid<T, CacheLine, DcciDst>(gm)
//       -- counted only: each block runs in program order, so races between pipes are not detected.
//   TPosition (QuePosition), TPipe::InitBuffer(que, num, len) / InitBuffer(tbuf, len) / Reset / Destroy,
//   TQue<pos, depth>::AllocTensor<T> / EnQue / DeQue<T> / FreeTensor / HasTensorInQue / ...,
//   TBuf<pos>::Get<T>() / Get<T>(len) / GetWithOffset<T>(len, byteOffset)
//   GlobalTensor<T>: SetGlobalBuffer(ptr[, len]), operator[], GetValue, SetValue, operator(), GetSize,
//       GetPhyAddr, ReinterpretCast
//   LocalTensor<T>: operator[] (offset view), GetValue, SetValue, operator(), GetSize, SetSize, GetLength,
//       ReinterpretCast<U>, GetPhyAddr, GetPosition
//   DataCopy(local, global, count), DataCopy(global, local, count), DataCopy(local, local, count), and the
//       DataCopyParams{blockCount, blockLen, srcStride, dstStride} forms (32-byte units);
//   DataCopyPad(local, global, DataCopyExtParams{blockCount, blockLen bytes, srcStride bytes, dstStride
//       blocks, rsv}, DataCopyPadExtParams<T>{isPad, leftPadding, rightPadding, paddingValue}) and
//       DataCopyPad(global, local, DataCopyExtParams) (UB stride in blocks, GM stride in bytes)
//   Vector, count form: Add Sub Mul Max Min (int16_t, half, int32_t, float), Div (half, float),
//       And Or Not (int16_t, uint16_t), Adds Muls Maxs Mins (dst, src, T scalar, count),
//       Exp Ln Abs Sqrt Rsqrt Reciprocal (half, float), Relu (half, int32_t, float), Duplicate(dst, scalar, n),
//       Axpy(dst, src, scalar, n), Cast(dst, src, RoundMode, n) (the Atlas A2 type pairs and modes),
//       ReduceSum / ReduceMax / ReduceMin(dst, src, sharedTmpBuffer, count[, calIndex]),
//       Compare(dstMask, a, b, CMPMODE, count), Compares(dstMask, a, scalar, CMPMODE, count),
//       Select(dst, mask, a, b | scalar, SELMODE, count)
//   Types: half (= _Float16), bfloat16_t (16-bit struct, float -> bf16 rounds to nearest even), float,
//       int8_t .. uint64_t.
//   Cube: lib/matmul_intf.h (Matmul high-level API) and kernel_tiling/kernel_tiling.h (TCubeTiling).
//
// ===================================================================================== rules enforced
// Each broken rule throws inside the kernel; the runner raises TwinError(block, rule, message).
//   ub-capacity        sum over InitBuffer of num x round_up(len, 32) <= cfg->ub_bytes (196608 on 910B);
//                      Select modes 1/2 need 8 KiB of UB left free
//   que-buffer-limit   at most 8 TQue buffers per TPosition (synchronisation events)
//   ub-alignment       UB operands of DataCopy and vector instructions start on 32-byte boundaries
//                      (ReduceSum/Max/Min dst: sizeof(T), 2 x sizeof(T) with calIndex)
//   ub-out-of-bounds   a UB access leaves the buffer the tensor came from (TQue slot or TBuf)
//   gm-out-of-bounds   a GM access leaves SetGlobalBuffer's length; SetGlobalBuffer outside the kernel's buffers
//   deque-empty, enque-full (more than `depth` tensors queued), enque-unallocated, alloc-exhausted (more
//   AllocTensor outstanding than the queue's buffers), free-twice, free-foreign, free-enqueued,
//   use-after-free, use-while-enqueued, queue-uninitialized, uninitialized-tensor
//   datacopy-params    DataCopyPad blockLen not a multiple of sizeof(T), padding over 32 bytes
//   reduce-workspace   ReduceMax/ReduceMin sharedTmpBuffer smaller than the documented minimum
//   cast-round-mode    a rounding mode the type pair does not accept
//   cube-tiling        TCubeTiling against the documented rules and L1/L0A/L0B/L0C (cfg) capacities
//   matmul-usage       Matmul calls out of order or inconsistent with the MatmulType / tiling
//   vector-args        negative counts, unsupported modes
//   twin-unsupported   a legal API use the twin does not model
// Hardware behaviour reproduced rather than refused:
//   DataCopy moves count * sizeof(T) rounded down to 32 bytes (counter datacopy_truncated);
//   DataCopyPad fills dummy bytes with the block's first element (no padding) or paddingValue (isPad);
//   Compare computes whole 256-byte repeats only (counter compare_truncated);
//   Cast saturates finite overflow; integer arithmetic wraps; count 0 is a no-op.
//   UB starts filled with cfg->ub_fill_byte (0xFF: NaN for float/half), so reading unwritten UB shows.
//
// ===================================================================================== counters per block
// See XBENCH_TWIN_SCALAR_COUNTERS in xbench_twin/runtime.h: MTE2/MTE3 bytes and instructions, vector calls,
// instructions (one per 256-byte repeat; Cast and Axpy by the wider type; reductions count every round) and
// elements, per-API vector instructions, cube MACs and fractals, scalar GM/UB accesses, DataCopy truncations,
// TQue EnQue / DeQue calls (tiles through the pipeline), UB high-water mark and each InitBuffer's bytes.
#ifndef XBENCH_TWIN_KERNEL_OPERATOR_H
#define XBENCH_TWIN_KERNEL_OPERATOR_H

#define XBENCH_TWIN 1

#include "xbench_twin/runtime.h"
#include "xbench_twin/types.h"
#include "xbench_twin/tensor.h"
#include "xbench_twin/datacopy.h"
#include "xbench_twin/vector.h"
#include "xbench_twin/launch.h"

#include "kernel_tiling/kernel_tiling.h"
#include "lib/matmul_intf.h"

#endif  // XBENCH_TWIN_KERNEL_OPERATOR_H
