// xbench Ascend C twin: GlobalTensor, LocalTensor, TPipe, TQue, TBuf, system queries and sync.
#ifndef XBENCH_TWIN_TENSOR_H
#define XBENCH_TWIN_TENSOR_H

#include "types.h"

namespace AscendC {

template <typename T> class LocalTensor;
template <typename T> class GlobalTensor;
class TPipe;

// ------------------------------------------------------------------------- system queries
__aicore__ inline int64_t GetBlockIdx() { return xbench_twin::ctx().block; }
__aicore__ inline int64_t GetBlockNum() { return xbench_twin::ctx().nblocks; }
__aicore__ inline int64_t GetSubBlockIdx() { return 0; }
__aicore__ inline int64_t GetSubBlockNum() { return 1; }
__aicore__ inline __gm__ uint8_t* GetSysWorkSpacePtr() {
    auto& c = xbench_twin::ctx();
    return c.user_workspace != nullptr ? c.user_workspace : c.sys_workspace;
}
__aicore__ inline void SetSysWorkspace(GM_ADDR workspace) {
    if (workspace != nullptr) xbench_twin::ctx().user_workspace = workspace;
}
__aicore__ inline uint32_t GetUBSizeInBytes() { return static_cast<uint32_t>(xbench_twin::ctx().cfg->ub_bytes); }

// ------------------------------------------------------------------------- synchronisation
// Each block runs in program order on one host thread, so barriers and flags only count.
template <pipe_t pipe> __aicore__ inline void PipeBarrier() { xbench_twin::counters().sync_calls += 1; }
template <HardEvent event> __aicore__ inline void SetFlag(int32_t eventID) {
    (void)eventID;
    xbench_twin::counters().sync_calls += 1;
}
template <HardEvent event> __aicore__ inline void WaitFlag(int32_t eventID) {
    (void)eventID;
    xbench_twin::counters().sync_calls += 1;
}
template <HardEvent event> __aicore__ inline void SetWaitFlag(int32_t eventID) {  // twin convenience
    SetFlag<event>(eventID);
    WaitFlag<event>(eventID);
}

// ------------------------------------------------------------------------- GlobalTensor
template <typename T>
class GlobalTensor {
public:
    using PrimType = T;

    __aicore__ inline GlobalTensor() {}

    __aicore__ inline void SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize) {
        xb_check_region(buffer, bufferSize, true);
        xb_base = buffer;
        xb_len = bufferSize;
        xb_off = 0;
    }
    __aicore__ inline void SetGlobalBuffer(__gm__ T* buffer) {
        const auto* r = xb_check_region(buffer, 0, false);
        uint64_t left = static_cast<uint64_t>(r->begin + r->bytes - reinterpret_cast<const uint8_t*>(buffer));
        xb_base = buffer;
        xb_len = left / sizeof(T);
        xb_off = 0;
    }
    __aicore__ inline GlobalTensor operator[](const uint64_t offset) const {
        GlobalTensor v = *this;
        v.xb_off = xb_off + offset;
        return v;
    }
    __aicore__ inline uint64_t GetSize() const { return xb_off <= xb_len ? xb_len - xb_off : 0; }
    __aicore__ inline const __gm__ T* GetPhyAddr() const { return xb_base + xb_off; }
    __aicore__ inline __gm__ T* GetPhyAddr(const uint64_t offset) const { return xb_base + xb_off + offset; }
    __aicore__ inline T GetValue(const uint64_t offset) const {
        T v;
        std::memcpy(&v, xb_elem(offset, "GlobalTensor::GetValue"), sizeof(T));
        xbench_twin::counters().scalar_gm_reads += 1;
        return v;
    }
    __aicore__ inline void SetValue(const uint64_t offset, T value) const {
        std::memcpy(xb_elem(offset, "GlobalTensor::SetValue"), &value, sizeof(T));
        xbench_twin::counters().scalar_gm_writes += 1;
    }
    __aicore__ inline __gm__ T& operator()(const uint64_t offset) const {
        xbench_twin::counters().scalar_gm_reads += 1;
        return *xb_elem(offset, "GlobalTensor::operator()");
    }
    template <typename CAST_T> __aicore__ inline GlobalTensor<CAST_T> ReinterpretCast() const {
        GlobalTensor<CAST_T> g;
        g.xb_base = reinterpret_cast<__gm__ CAST_T*>(xb_base);
        g.xb_len = xb_len * sizeof(T) / sizeof(CAST_T);
        g.xb_off = xb_off * sizeof(T) / sizeof(CAST_T);
        return g;
    }
    template <int rwMode = 0, class Mode> __aicore__ inline void SetL2CacheHint(Mode) {}

    // Twin state: the SetGlobalBuffer base and length, and this view's element offset.
    __gm__ T* xb_base = nullptr;
    uint64_t xb_len = 0;
    uint64_t xb_off = 0;

    // Byte range [first, first + bytes) counted from this view's start must lie in SetGlobalBuffer's length.
    T* xb_range(uint64_t first, uint64_t bytes, const char* api, const char* what) const {
        if (xb_base == nullptr) {
            xbench_twin::fail("gm-out-of-bounds", xbench_twin::cat(
                api, ": the ", what, " GlobalTensor has no memory; call SetGlobalBuffer(ptr, length) first"));
        }
        uint64_t start = xb_off * sizeof(T) + first, end = start + bytes, cap = xb_len * sizeof(T);
        if (end > cap) {
            xbench_twin::fail("gm-out-of-bounds", xbench_twin::cat(
                api, ": ", what, " GM access to elements [", start / sizeof(T), ", ", xbench_twin::ceil_div(end, sizeof(T)),
                ") of a ", xbench_twin::type_name<T>(), " GlobalTensor whose SetGlobalBuffer length is ", xb_len,
                " elements (", cap, " bytes); the access ends ", end - cap,
                " bytes past it. Check the block offset and tile length, or DataCopyPad the tail."));
        }
        return reinterpret_cast<T*>(reinterpret_cast<uint8_t*>(xb_base) + start);
    }

private:
    T* xb_elem(uint64_t offset, const char* api) const { return xb_range(offset * sizeof(T), sizeof(T), api, "scalar"); }

    static const xbench_twin::GmRegion* xb_check_region(__gm__ T* buffer, uint64_t n, bool sized) {
        using namespace xbench_twin;
        if (buffer == nullptr) {
            fail("gm-out-of-bounds", "SetGlobalBuffer got a null pointer: the kernel argument was not passed (None)");
        }
        const GmRegion* r = find_region(buffer);
        if (r == nullptr) {
            fail("gm-out-of-bounds", cat("SetGlobalBuffer: pointer ", static_cast<const void*>(buffer),
                                         " is not inside any GM buffer passed to the kernel (or the system workspace)"));
        }
        uint64_t off = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(buffer) - r->begin);
        if (sized && off + n * sizeof(T) > r->bytes) {
            fail("gm-out-of-bounds", cat(
                "SetGlobalBuffer(ptr, ", n, "): ", n, " ", type_name<T>(), " elements = ", n * sizeof(T),
                " bytes starting at byte ", off, " of ", r->name, " (", r->bytes, " bytes) end at byte ",
                off + n * sizeof(T), ", past its end. The block offset or the length is too large."));
        }
        return r;
    }
};

// ------------------------------------------------------------------------- data cache
// Scalar GM writes (GlobalTensor::SetValue) go through the core's data cache; a kernel flushes them with
// DataCacheCleanAndInvalid before other pipes or kernels read that memory. Host memory is coherent, so the
// twin only counts the call (sync_calls).
enum class CacheLine : uint8_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE };
enum class DcciDst : uint8_t { CACHELINE_ALL = 0, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
template <typename T, CacheLine entireType, DcciDst dcciDst>
__aicore__ inline void DataCacheCleanAndInvalid(const GlobalTensor<T>& dstTensor) {
    (void)dstTensor;
    xbench_twin::counters().sync_calls += 1;
}

// ------------------------------------------------------------------------- LocalTensor
template <typename T>
class LocalTensor {
public:
    using PrimType = T;

    __aicore__ inline LocalTensor() {}
    // A tensor at a raw UB address (bounds: the whole Unified Buffer).
    __aicore__ inline LocalTensor(TPosition pos, uint32_t addr, uint32_t tileSize) {
        xb_ub = xbench_twin::ctx().ub.data();
        xb_addr = addr;
        xb_size = tileSize;
        xb_pos = pos;
        xb_buf = -2;
    }

    __aicore__ inline LocalTensor operator[](const uint32_t offset) const {
        LocalTensor v = *this;
        v.xb_addr = xb_addr + offset * static_cast<uint32_t>(sizeof(T));
        v.xb_size = offset <= xb_size ? xb_size - offset : 0;
        return v;
    }
    __aicore__ inline uint32_t GetSize() const { return xb_size; }
    __aicore__ inline void SetSize(const uint32_t size) { xb_size = size; }
    __aicore__ inline uint32_t GetLength() const { return xb_size * static_cast<uint32_t>(sizeof(T)); }
    __aicore__ inline int32_t GetPosition() const { return static_cast<int32_t>(xb_pos); }
    __aicore__ inline T* GetPhyAddr() const { return reinterpret_cast<T*>(xb_ub + xb_addr); }
    __aicore__ inline T* GetPhyAddr(const uint32_t offset) const { return GetPhyAddr() + offset; }

    __aicore__ inline T GetValue(const uint32_t index) const {
        T v;
        std::memcpy(&v, xb_elem(index, "LocalTensor::GetValue"), sizeof(T));
        xbench_twin::counters().scalar_ub_reads += 1;
        return v;
    }
    template <typename T1> __aicore__ inline void SetValue(const uint32_t index, const T1 value) const {
        T v = static_cast<T>(value);
        std::memcpy(xb_elem(index, "LocalTensor::SetValue"), &v, sizeof(T));
        xbench_twin::counters().scalar_ub_writes += 1;
    }
    __aicore__ inline T& operator()(const uint32_t index) const {
        xbench_twin::counters().scalar_ub_reads += 1;
        return *reinterpret_cast<T*>(xb_elem(index, "LocalTensor::operator()"));
    }
    template <typename CAST_T> __aicore__ inline LocalTensor<CAST_T> ReinterpretCast() const {
        LocalTensor<CAST_T> r;
        r.xb_ub = xb_ub;
        r.xb_addr = xb_addr;
        r.xb_size = static_cast<uint32_t>(static_cast<uint64_t>(xb_size) * sizeof(T) / sizeof(CAST_T));
        r.xb_buf = xb_buf;
        r.xb_gen = xb_gen;
        r.xb_pos = xb_pos;
        return r;
    }

    // Twin state: UB base, byte address, element count, the buffer record it came from and its generation.
    uint8_t* xb_ub = nullptr;
    uint32_t xb_addr = 0;
    uint32_t xb_size = 0;
    int32_t xb_buf = -1;  // index into BlockCtx::bufs; -2 for a raw-address tensor
    uint32_t xb_gen = 0;
    TPosition xb_pos = TPosition::VECCALC;

private:
    uint8_t* xb_elem(uint32_t index, const char* api) const;
};

}  // namespace AscendC

namespace xbench_twin {

// Describe where a UB address sits, for messages.
inline std::string ub_where(uint32_t addr, int32_t buf) {
    if (buf >= 0 && buf < static_cast<int32_t>(ctx().bufs.size())) {
        const auto& b = ctx().bufs[buf];
        return cat("UB address ", addr, " (offset ", static_cast<int64_t>(addr) - b.begin, " bytes into a ",
                   b.bytes, "-byte ", b.is_queue ? "TQue" : "TBuf", " buffer at UB address ", b.begin, ")");
    }
    return cat("UB address ", addr);
}

// Validate a UB operand and return its host pointer: allocated, alive, aligned, inside its buffer.
template <class T>
T* ub_operand(const AscendC::LocalTensor<T>& t, uint64_t nbytes, const char* api, const char* operand,
              uint32_t align = 32) {
    if (t.xb_ub == nullptr) {
        fail("uninitialized-tensor", cat(api, ": operand ", operand, " is a LocalTensor that was never given UB memory;"
                                         " get it from TQue::AllocTensor / DeQue or TBuf::Get"));
    }
    auto& c = ctx();
    uint64_t lo = 0, hi = c.ub.size();
    if (t.xb_buf >= 0) {
        const BufRec& b = c.bufs[t.xb_buf];
        if (b.state == BufState::kDead) {
            fail("use-after-free", cat(api, ": operand ", operand, " lives in a buffer released by TPipe::Reset/Destroy"));
        }
        if (b.is_queue && (t.xb_gen != b.gen || b.state == BufState::kFree)) {
            fail("use-after-free", cat(api, ": operand ", operand, " is a LocalTensor that was already released with"
                                       " FreeTensor; AllocTensor or DeQue a new one"));
        }
        if (b.is_queue && b.state == BufState::kEnqueued) {
            fail("use-while-enqueued", cat(api, ": operand ", operand, " is still in its queue after EnQue; DeQue it"
                                           " before reading or writing it"));
        }
        lo = b.begin;
        hi = static_cast<uint64_t>(b.begin) + b.bytes;
    }
    if (t.xb_addr % align != 0) {
        fail("ub-alignment", cat(api, ": operand ", operand, " starts at ", ub_where(t.xb_addr, t.xb_buf),
                                 ", which is not ", align, "-byte aligned (", t.xb_addr % align,
                                 " bytes off). UB operands of DataCopy and vector instructions must start on a ",
                                 align, "-byte boundary: make the offset a multiple of ", align / sizeof(T),
                                 " elements of ", type_name<T>(), "."));
    }
    if (t.xb_addr < lo || t.xb_addr + nbytes > hi) {
        fail("ub-out-of-bounds", cat(api, ": operand ", operand, " accesses ", nbytes, " bytes from ",
                                     ub_where(t.xb_addr, t.xb_buf), ", which ends ",
                                     static_cast<int64_t>(t.xb_addr + nbytes) - static_cast<int64_t>(hi),
                                     " bytes past the buffer (it spans UB [", lo, ", ", hi, ")). Reduce the count"
                                     " or give the buffer more room in InitBuffer."));
    }
    return reinterpret_cast<T*>(t.xb_ub + t.xb_addr);
}

// Bytes from a tensor's start to the end of the buffer it came from (0 for an unallocated tensor).
template <class T> uint64_t ub_room(const AscendC::LocalTensor<T>& t) {
    if (t.xb_ub == nullptr) return 0;
    uint64_t hi = t.xb_buf >= 0 ? static_cast<uint64_t>(ctx().bufs[t.xb_buf].begin) + ctx().bufs[t.xb_buf].bytes
                                : ctx().ub.size();
    return hi > t.xb_addr ? hi - t.xb_addr : 0;
}

template <class T> uint64_t vec_repeats(uint64_t count) { return ceil_div(count * sizeof(T), 256); }

}  // namespace xbench_twin

namespace AscendC {

template <typename T>
uint8_t* LocalTensor<T>::xb_elem(uint32_t index, const char* api) const {
    LocalTensor<T> e = (*this)[index];
    return reinterpret_cast<uint8_t*>(xbench_twin::ub_operand(e, sizeof(T), api, "scalar", 1));
}

// ------------------------------------------------------------------------- TPipe, TQue, TBuf
template <TPosition pos> class TBuf;

class TPipe {
public:
    __aicore__ inline TPipe() {
        auto& c = xbench_twin::ctx();
        c.live_pipes += 1;
        xb_current() = this;
    }
    __aicore__ inline ~TPipe() {
        xb_release();
        auto& c = xbench_twin::ctx();
        c.live_pipes -= 1;
        if (xb_current() == this) xb_current() = nullptr;
    }
    TPipe(const TPipe&) = delete;
    TPipe& operator=(const TPipe&) = delete;

    template <class Q> __aicore__ inline bool InitBuffer(Q& que, uint8_t num, uint32_t len) {
        static_assert(Q::xb_is_queue, "InitBuffer(que, num, len) takes a TQue; a TBuf takes InitBuffer(buf, len)");
        int32_t first = xb_carve(0, static_cast<int>(Q::xb_position), num, len);
        que.xb_attach(first, num, len);
        return true;
    }
    template <TPosition bufPos> __aicore__ inline bool InitBuffer(TBuf<bufPos>& buf, uint32_t len);

    __aicore__ inline void Reset() { xb_release(); }
    __aicore__ inline void Destroy() { xb_release(); }
    __aicore__ inline void Init() {}

    template <HardEvent evt> __aicore__ inline TEventID FetchEventID() { return 0; }
    __aicore__ inline TEventID FetchEventID(HardEvent) { return 0; }
    template <HardEvent evt> __aicore__ inline TEventID AllocEventID() { return 0; }
    template <HardEvent evt> __aicore__ inline void ReleaseEventID(TEventID) {}

    // Twin: carve `num` buffers of `len` bytes (each rounded up to 32) from the UB; returns the first record.
    int32_t xb_carve(int kind, int pos, uint32_t num, uint32_t len) {
        using namespace xbench_twin;
        auto& c = ctx();
        if (!is_ub_position(static_cast<TPosition>(pos))) {
            fail("twin-unsupported", cat("InitBuffer for a ", kind ? "TBuf" : "TQue", " at TPosition::", position_name(pos),
                                         ": the twin models the Unified Buffer (VECIN, VECOUT, VECCALC); cube data"
                                         " goes through the Matmul high-level API"));
        }
        if (num == 0 || len == 0) {
            fail("init-buffer", cat("InitBuffer(", kind ? "buf" : "que", ", ", kind ? "" : cat(num, ", "), len,
                                    "): buffer count and length must be positive"));
        }
        if (kind == 0) {
            uint32_t same = num;
            for (const auto& r : xb_records) {
                if (r.kind == 0 && r.pos == pos) same += static_cast<uint32_t>(r.num);
            }
            if (same > 8) {
                fail("que-buffer-limit", cat("InitBuffer: TQue buffers at TPosition::", position_name(pos), " would number ",
                                             same, "; a core has 8 synchronisation events per position, so at most 8 TQue"
                                             " buffers may share one. Use fewer queues or BUFFER_NUM=1, or a TBuf."));
            }
        }
        uint64_t each = round_up(len, 32);
        uint64_t bytes = each * num;
        uint64_t total = xb_cursor + bytes;
        xb_records.push_back(InitRecord{kind, pos, num, len, bytes, xb_cursor});
        if (total > c.cfg->ub_bytes) {
            std::ostringstream s;
            s << "TPipe::InitBuffer carves " << total << " bytes of Unified Buffer in all, more than the "
              << c.cfg->ub_bytes << " bytes a core has (" << total - c.cfg->ub_bytes << " over). Buffers: ";
            for (size_t i = 0; i < xb_records.size(); ++i) {
                const auto& r = xb_records[i];
                s << (i ? "; " : "") << "#" << i << " " << (r.kind ? "TBuf" : "TQue") << "<" << position_name(r.pos)
                  << "> " << r.num << " x " << round_up(r.len, 32) << " B = " << r.bytes << " B"
                  << (i + 1 == xb_records.size() ? " (this call)" : "");
            }
            s << ". Shrink the tile length or the buffer count (num x bytes, each rounded up to 32 B, must sum to at most "
              << c.cfg->ub_bytes << ").";
            fail("ub-capacity", s.str());
        }
        int32_t first = static_cast<int32_t>(c.bufs.size());
        for (uint32_t i = 0; i < num; ++i) {
            BufRec b;
            b.begin = static_cast<uint32_t>(xb_cursor + i * each);
            b.bytes = static_cast<uint32_t>(each);
            b.len = len;
            b.is_queue = kind == 0;
            b.pos = pos;
            c.bufs.push_back(b);
            xb_ids.push_back(first + static_cast<int32_t>(i));
        }
        xb_cursor = total;
        c.ub_in_use = xb_cursor;
        c.c.ub_high_water = std::max<uint64_t>(c.c.ub_high_water, xb_cursor);
        c.inits.push_back(xb_records.back());
        return first;
    }

    static TPipe*& xb_current() {
        static thread_local TPipe* p = nullptr;
        return p;
    }

private:
    void xb_release() {
        auto& c = xbench_twin::ctx();
        for (int32_t id : xb_ids) c.bufs[id].state = xbench_twin::BufState::kDead;
        xb_ids.clear();
        xb_records.clear();
        xb_cursor = 0;
        c.ub_in_use = 0;
    }

    uint64_t xb_cursor = 0;
    std::vector<int32_t> xb_ids;
    std::vector<xbench_twin::InitRecord> xb_records;
};

__aicore__ inline TPipe* GetTPipePtr() { return TPipe::xb_current(); }

template <TPosition pos, int32_t depth, auto mask = 0>
class TQue {
    static_assert(depth >= 1, "the twin supports TQue depth >= 1 (in-place queues with depth 0 are not modelled)");

public:
    static constexpr bool xb_is_queue = true;
    static constexpr TPosition xb_position = pos;

    __aicore__ inline TQue() {}
    TQue(const TQue&) = delete;
    TQue& operator=(const TQue&) = delete;

    template <typename T> __aicore__ inline LocalTensor<T> AllocTensor() {
        using namespace xbench_twin;
        auto& c = ctx();
        xb_require_init("AllocTensor");
        uint32_t n = static_cast<uint32_t>(xb_bufs.size());
        for (uint32_t k = 0; k < n; ++k) {
            uint32_t i = (xb_next + k) % n;
            BufRec& b = c.bufs[xb_bufs[i]];
            if (b.state == BufState::kFree) {
                b.state = BufState::kAllocated;
                xb_next = (i + 1) % n;
                return xb_tensor<T>(xb_bufs[i]);
            }
        }
        fail("alloc-exhausted", cat("TQue<", position_name(static_cast<int>(pos)), ", ", depth, "> #", xb_id,
                                    ": AllocTensor with all ", n, " of its buffers still outstanding (allocated or in"
                                    " the queue). FreeTensor one first, or give the queue more buffers in"
                                    " InitBuffer(que, num, len)."));
    }
    template <typename T> __aicore__ inline void AllocTensor(LocalTensor<T>& tensor) { tensor = AllocTensor<T>(); }

    template <typename T> __aicore__ inline bool EnQue(const LocalTensor<T>& tensor) {
        using namespace xbench_twin;
        auto& c = ctx();
        xb_require_init("EnQue");
        int32_t slot = xb_slot_of(tensor);
        if (slot < 0 || c.bufs[tensor.xb_buf].gen != tensor.xb_gen ||
            c.bufs[tensor.xb_buf].state == BufState::kFree) {
            fail("enque-unallocated", cat("TQue<", position_name(static_cast<int>(pos)), ", ", depth, "> #", xb_id,
                                          ": EnQue of a tensor that was not allocated from this queue (or was already"
                                          " freed). EnQue only tensors this queue's AllocTensor returned."));
        }
        BufRec& b = c.bufs[tensor.xb_buf];
        if (b.state == BufState::kEnqueued) {
            fail("enque-unallocated", cat("TQue #", xb_id, ": EnQue of a tensor that is already in the queue"));
        }
        if (xb_fifo.size() >= static_cast<size_t>(depth)) {
            fail("enque-full", cat("TQue<", position_name(static_cast<int>(pos)), ", ", depth, "> #", xb_id, ": EnQue with ",
                                   xb_fifo.size(), " tensors already queued; the queue depth (template argument) is ", depth,
                                   ". DeQue first, or declare the queue with a larger depth."));
        }
        b.state = BufState::kEnqueued;
        xb_fifo.push_back(tensor.xb_buf);
        c.c.que_enque += 1;
        return true;
    }

    template <typename T> __aicore__ inline LocalTensor<T> DeQue() {
        using namespace xbench_twin;
        auto& c = ctx();
        xb_require_init("DeQue");
        if (xb_fifo.empty()) {
            fail("deque-empty", cat("TQue<", position_name(static_cast<int>(pos)), ", ", depth, "> #", xb_id,
                                    ": DeQue on an empty queue (nothing was EnQue'd since the last DeQue). Every DeQue"
                                    " needs a matching EnQue before it."));
        }
        int32_t id = xb_fifo.front();
        xb_fifo.erase(xb_fifo.begin());
        c.bufs[id].state = BufState::kDequeued;
        c.c.que_deque += 1;
        return xb_tensor<T>(id);
    }
    template <typename T> __aicore__ inline void DeQue(LocalTensor<T>& tensor) { tensor = DeQue<T>(); }

    template <typename T> __aicore__ inline void FreeTensor(LocalTensor<T>& tensor) {
        using namespace xbench_twin;
        auto& c = ctx();
        xb_require_init("FreeTensor");
        int32_t slot = xb_slot_of(tensor);
        if (slot < 0) {
            fail("free-foreign", cat("TQue<", position_name(static_cast<int>(pos)), ", ", depth, "> #", xb_id,
                                     ": FreeTensor of a tensor that does not belong to this queue. Free it on the queue"
                                     " that allocated it."));
        }
        BufRec& b = c.bufs[tensor.xb_buf];
        if (b.gen != tensor.xb_gen || b.state == BufState::kFree) {
            fail("free-twice", cat("TQue<", position_name(static_cast<int>(pos)), ", ", depth, "> #", xb_id,
                                   ": FreeTensor of a tensor that was already freed (double free)."));
        }
        if (b.state == BufState::kEnqueued) {
            fail("free-enqueued", cat("TQue #", xb_id, ": FreeTensor of a tensor that is still in the queue; DeQue it"
                                      " first."));
        }
        b.state = BufState::kFree;
        b.gen += 1;
    }

    __aicore__ inline bool HasTensorInQue() { return !xb_fifo.empty(); }
    __aicore__ inline int32_t GetTensorCountInQue() { return static_cast<int32_t>(xb_fifo.size()); }
    __aicore__ inline bool VacantInQue() { return xb_fifo.size() < static_cast<size_t>(depth); }
    __aicore__ inline bool HasIdleBuffer() {
        for (int32_t id : xb_bufs) {
            if (xbench_twin::ctx().bufs[id].state == xbench_twin::BufState::kFree) return true;
        }
        return false;
    }
    __aicore__ inline void FreeAllEvent() {}

    // Twin: called by TPipe::InitBuffer.
    void xb_attach(int32_t first, uint32_t num, uint32_t len) {
        auto& c = xbench_twin::ctx();
        xb_id = c.next_queue_id++;
        xb_bufs.clear();
        xb_fifo.clear();
        for (uint32_t i = 0; i < num; ++i) {
            xb_bufs.push_back(first + static_cast<int32_t>(i));
            c.bufs[first + i].owner = xb_id;
        }
        xb_next = 0;
        xb_len = len;
    }

private:
    void xb_require_init(const char* api) const {
        using namespace xbench_twin;
        bool ok = !xb_bufs.empty() && ctx().bufs[xb_bufs[0]].state != BufState::kDead;
        if (!ok) {
            fail("queue-uninitialized", cat("TQue<", position_name(static_cast<int>(pos)), ", ", depth, ">::", api,
                                            " before TPipe::InitBuffer(que, num, len) gave the queue memory (or after"
                                            " TPipe::Reset/Destroy)"));
        }
    }
    template <typename T> int32_t xb_slot_of(const LocalTensor<T>& t) const {
        for (size_t i = 0; i < xb_bufs.size(); ++i) {
            if (xb_bufs[i] == t.xb_buf) return static_cast<int32_t>(i);
        }
        return -1;
    }
    template <typename T> LocalTensor<T> xb_tensor(int32_t id) const {
        auto& c = xbench_twin::ctx();
        LocalTensor<T> t;
        t.xb_ub = c.ub.data();
        t.xb_addr = c.bufs[id].begin;
        t.xb_size = xb_len / static_cast<uint32_t>(sizeof(T));
        t.xb_buf = id;
        t.xb_gen = c.bufs[id].gen;
        t.xb_pos = pos;
        return t;
    }

    int32_t xb_id = -1;
    std::vector<int32_t> xb_bufs;
    std::vector<int32_t> xb_fifo;
    uint32_t xb_next = 0;
    uint32_t xb_len = 0;
};

template <TPosition pos = TPosition::LCM>
class TBuf {
public:
    static constexpr bool xb_is_queue = false;
    static constexpr TPosition xb_position = pos;

    __aicore__ inline TBuf() {}

    template <typename T> __aicore__ inline LocalTensor<T> Get() { return Get<T>(xb_len / sizeof(T)); }
    template <typename T> __aicore__ inline LocalTensor<T> Get(uint32_t len) {
        return GetWithOffset<T>(len, 0);
    }
    template <typename T> __aicore__ inline LocalTensor<T> GetWithOffset(uint32_t size, uint32_t bufOffset) {
        using namespace xbench_twin;
        auto& c = ctx();
        if (xb_buf < 0 || c.bufs[xb_buf].state == BufState::kDead) {
            fail("queue-uninitialized", "TBuf::Get before TPipe::InitBuffer(buf, len) gave it memory (or after"
                                        " TPipe::Reset/Destroy)");
        }
        uint64_t need = static_cast<uint64_t>(bufOffset) + static_cast<uint64_t>(size) * sizeof(T);
        if (need > xb_len) {
            fail("ub-out-of-bounds", cat("TBuf<", position_name(static_cast<int>(pos)), ">::Get: ", size, " elements of ",
                                         type_name<T>(), " at byte offset ", bufOffset, " need ", need,
                                         " bytes but InitBuffer gave the TBuf ", xb_len, " bytes"));
        }
        LocalTensor<T> t;
        t.xb_ub = c.ub.data();
        t.xb_addr = c.bufs[xb_buf].begin + bufOffset;
        t.xb_size = size;
        t.xb_buf = xb_buf;
        t.xb_gen = c.bufs[xb_buf].gen;
        t.xb_pos = pos;
        return t;
    }

    int32_t xb_buf = -1;
    uint32_t xb_len = 0;
};

template <TPosition bufPos>
__aicore__ inline bool TPipe::InitBuffer(TBuf<bufPos>& buf, uint32_t len) {
    buf.xb_buf = xb_carve(1, static_cast<int>(bufPos), 1, len);
    buf.xb_len = len;
    xbench_twin::ctx().bufs[buf.xb_buf].state = xbench_twin::BufState::kAllocated;
    return true;
}

}  // namespace AscendC

#endif  // XBENCH_TWIN_TENSOR_H
