// xbench Ascend C twin: the runtime behind the API (per-block state, rules, counters, C ABI).
// Clean-room code written for xbench; see ../kernel_operator.h for what the twin is and how it is used.
#ifndef XBENCH_TWIN_RUNTIME_H
#define XBENCH_TWIN_RUNTIME_H

#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cmath>
#include <string>
#include <sstream>
#include <vector>
#include <exception>
#include <type_traits>
#include <utility>
#include <algorithm>
#include <limits>

// ---------------------------------------------------------------------------------------------
// C ABI shared with xbench/backends/ascend/twin.py. Bump XBENCH_TWIN_ABI on any layout change.
// ---------------------------------------------------------------------------------------------
#define XBENCH_TWIN_ABI 2
#define XBENCH_TWIN_MAX_BUFFERS 32
#define XBENCH_TWIN_NUM_OPS 32

// Scalar counters, in struct order. The Python side reads the names from xbench_twin_counter_names().
#define XBENCH_TWIN_SCALAR_COUNTERS(X)                                                              \
    X(mte2_bytes)               /* GM -> UB (DataCopy, DataCopyPad) and GM -> L1 (Matmul model) */   \
    X(mte3_bytes)               /* UB -> GM */                                                      \
    X(ub_copy_bytes)            /* UB -> UB DataCopy */                                             \
    X(fixpipe_bytes)            /* L0C -> GM (Matmul results) */                                    \
    X(mte2_instr)               /* MTE2 transfer instructions (one per DataCopy call) */            \
    X(mte3_instr)               /* MTE3 transfer instructions */                                    \
    X(vec_calls)                /* vector API calls */                                              \
    X(vec_instr)                /* vector instructions: 256-byte repeats issued */                  \
    X(vec_elems)                /* elements processed by vector API calls */                        \
    X(cube_macs)                /* multiply-accumulates done by Matmul (unpadded M*N*K) */          \
    X(cube_fractals)            /* 16 x 16 x C0 fractal MMADs the cube issues (padded base tiles) */ \
    X(matmul_calls)             /* IterateAll calls */                                              \
    X(scalar_gm_reads)          /* GlobalTensor::GetValue / operator() reads */                     \
    X(scalar_gm_writes)         /* GlobalTensor::SetValue */                                        \
    X(scalar_ub_reads)          /* LocalTensor::GetValue / operator() */                            \
    X(scalar_ub_writes)         /* LocalTensor::SetValue */                                         \
    X(datacopy_truncated)       /* DataCopy calls whose count*sizeof(T) was rounded down to 32 B */ \
    X(datacopy_truncated_bytes) /* bytes those calls did not move */                                \
    X(compare_truncated)        /* Compare calls whose count was rounded down to 256 B */           \
    X(sync_calls)               /* PipeBarrier / SetFlag / WaitFlag / DataCacheCleanAndInvalid calls */ \
    X(que_enque)                /* TQue::EnQue calls (tiles handed from one pipe to the next) */    \
    X(que_deque)                /* TQue::DeQue calls */                                             \
    X(ub_high_water)            /* bytes of UB carved by TPipe::InitBuffer (peak) */

extern "C" {
typedef struct XbenchTwinConfig {
    uint64_t ub_bytes;            // Unified Buffer per vector core (910B: 196608)
    uint64_t l1_bytes;            // L1 per cube core (910B: 524288)
    uint64_t l0a_bytes;           // 65536
    uint64_t l0b_bytes;           // 65536
    uint64_t l0c_bytes;           // 131072
    uint64_t max_cube_cores;      // upper bound for TCubeTiling::usedCoreNum (910B2: 24)
    uint64_t sys_workspace_bytes; // size of the buffer GetSysWorkSpacePtr() returns
    uint64_t num_threads;         // worker threads; 0 = one per hardware thread
    uint64_t ub_fill_byte;        // UB bytes start as this value (0xFF: NaN for float/half, -1 for ints)
} XbenchTwinConfig;

typedef struct XbenchTwinCounters {
#define XBENCH_TWIN_FIELD_(n) uint64_t n;
    XBENCH_TWIN_SCALAR_COUNTERS(XBENCH_TWIN_FIELD_)
#undef XBENCH_TWIN_FIELD_
    uint64_t num_buffers;                             // InitBuffer calls recorded below (first 32)
    uint64_t buffer_bytes[XBENCH_TWIN_MAX_BUFFERS];   // num x round_up(len, 32)
    uint64_t buffer_num[XBENCH_TWIN_MAX_BUFFERS];     // buffers (1 for a TBuf)
    uint64_t buffer_len[XBENCH_TWIN_MAX_BUFFERS];     // requested bytes per buffer
    uint64_t buffer_pos[XBENCH_TWIN_MAX_BUFFERS];     // AscendC::TPosition value
    uint64_t buffer_kind[XBENCH_TWIN_MAX_BUFFERS];    // 0 = TQue, 1 = TBuf
    uint64_t buffer_addr[XBENCH_TWIN_MAX_BUFFERS];    // UB byte address of the first buffer
    uint64_t vec_instr_by_op[XBENCH_TWIN_NUM_OPS];    // vec_instr split by API (see op names)
} XbenchTwinCounters;

typedef struct XbenchTwinStatus {
    int64_t block;       // block index that failed first (lowest index), -1 when none
    char rule[64];       // rule id, e.g. "ub-capacity"
    char message[4000];  // what was wrong and what to write instead
} XbenchTwinStatus;
}

#define XBENCH_TWIN_OPS(X)                                                                         \
    X(Add) X(Sub) X(Mul) X(Div) X(Max) X(Min) X(And) X(Or) X(Adds) X(Muls) X(Maxs) X(Mins)          \
    X(Exp) X(Ln) X(Abs) X(Sqrt) X(Rsqrt) X(Reciprocal) X(Relu) X(Not) X(Duplicate) X(Cast)          \
    X(ReduceSum) X(ReduceMax) X(ReduceMin) X(Compare) X(Compares) X(Select) X(Axpy)

namespace xbench_twin {

enum class Op : int {
#define XBENCH_TWIN_OP_(n) n,
    XBENCH_TWIN_OPS(XBENCH_TWIN_OP_)
#undef XBENCH_TWIN_OP_
    kCount
};
static_assert(static_cast<int>(Op::kCount) <= XBENCH_TWIN_NUM_OPS, "too many ops for the counters array");

// A broken hardware rule. Thrown inside kernel code, caught by the launcher; kernels never see it.
struct TwinError : std::exception {
    std::string rule, message;
    TwinError(std::string r, std::string m) : rule(std::move(r)), message(std::move(m)) {}
    const char* what() const noexcept override { return message.c_str(); }
};

[[noreturn]] inline void fail(const char* rule, const std::string& message) { throw TwinError(rule, message); }

template <class... A>
std::string cat(const A&... a) {
    std::ostringstream s;
    (s << ... << a);
    return s.str();
}

constexpr uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
constexpr uint64_t ceil_div(uint64_t v, uint64_t a) { return (v + a - 1) / a; }

// A GM range the launcher knows: a kernel argument or the system workspace.
struct GmRegion {
    const uint8_t* begin;
    uint64_t bytes;
    std::string name;
};

enum class BufState : uint8_t { kFree, kAllocated, kEnqueued, kDequeued, kDead };

// One UB buffer handed out by TPipe::InitBuffer (a queue slot or a whole TBuf).
struct BufRec {
    uint32_t begin = 0;    // UB byte address
    uint32_t bytes = 0;    // carved size (rounded up to 32 B)
    uint32_t len = 0;      // requested size
    uint32_t gen = 1;      // bumped on FreeTensor; tensors carry the generation they were handed
    BufState state = BufState::kFree;
    bool is_queue = false;
    int32_t owner = -1;    // queue id for queue buffers
    int pos = 0;           // TPosition value
};

struct InitRecord {
    int kind;  // 0 TQue, 1 TBuf
    int pos;
    uint64_t num, len, bytes, addr;
};

struct BlockCtx {
    int64_t block = 0, nblocks = 1;
    const XbenchTwinConfig* cfg = nullptr;
    XbenchTwinCounters c{};
    std::vector<uint8_t> ub;
    std::vector<BufRec> bufs;
    std::vector<InitRecord> inits;
    const std::vector<GmRegion>* gm = nullptr;
    uint8_t* sys_workspace = nullptr;
    uint8_t* user_workspace = nullptr;
    int32_t next_queue_id = 0;
    int32_t live_pipes = 0;
    uint64_t ub_in_use = 0;  // bytes carved by the live TPipe (for rules that need free UB)
};

inline thread_local BlockCtx* g_ctx = nullptr;

inline BlockCtx& ctx() {
    if (g_ctx == nullptr) {
        // Not a rule of the hardware: kernel code ran outside XBENCH_TWIN_LAUNCH's launcher.
        throw std::logic_error("xbench twin: AscendC API called outside a kernel launch");
    }
    return *g_ctx;
}

inline XbenchTwinCounters& counters() { return ctx().c; }

inline void count_vec(Op op, uint64_t repeats, uint64_t elems) {
    auto& c = counters();
    c.vec_calls += 1;
    c.vec_instr += repeats;
    c.vec_elems += elems;
    c.vec_instr_by_op[static_cast<int>(op)] += repeats;
}

// Which GM region holds p (or ends exactly at p)? Returns nullptr when p is in none.
inline const GmRegion* find_region(const void* p) {
    const auto* gm = ctx().gm;
    if (gm == nullptr) return nullptr;
    auto* b = static_cast<const uint8_t*>(p);
    for (const auto& r : *gm) {
        if (b >= r.begin && b < r.begin + r.bytes) return &r;
    }
    for (const auto& r : *gm) {
        if (b == r.begin + r.bytes) return &r;  // one past the end: a view with nothing left
    }
    return nullptr;
}

inline const char* position_name(int pos);

}  // namespace xbench_twin

#endif  // XBENCH_TWIN_RUNTIME_H
