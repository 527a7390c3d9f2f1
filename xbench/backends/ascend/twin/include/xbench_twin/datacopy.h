// xbench Ascend C twin: DataCopy and DataCopyPad between GM and the Unified Buffer.
#ifndef XBENCH_TWIN_DATACOPY_H
#define XBENCH_TWIN_DATACOPY_H

#include "tensor.h"

namespace AscendC {

// Strided copy parameters: blockLen and both strides (gaps between blocks) in 32-byte units.
struct DataCopyParams {
    __aicore__ DataCopyParams() {}
    __aicore__ DataCopyParams(const uint16_t count, const uint16_t len, const uint16_t srcStrideIn,
                              const uint16_t dstStrideIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn) {}
    uint16_t blockCount = 1;
    uint16_t blockLen = 0;
    uint16_t srcStride = 0;
    uint16_t dstStride = 0;
};

// DataCopyPad parameters: blockLen in bytes; a GM stride in bytes, a UB stride in 32-byte blocks.
struct DataCopyExtParams {
    __aicore__ DataCopyExtParams() {}
    __aicore__ DataCopyExtParams(const uint16_t count, const uint32_t len, const uint32_t srcStrideIn,
                                 const uint32_t dstStrideIn, const uint32_t rsvIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn), rsv(rsvIn) {}
    uint16_t blockCount = 1;
    uint32_t blockLen = 0;
    uint32_t srcStride = 0;
    uint32_t dstStride = 0;
    uint32_t rsv = 0;
};

template <typename T>
struct DataCopyPadExtParams {
    __aicore__ DataCopyPadExtParams() {}
    __aicore__ DataCopyPadExtParams(const bool isPadValue, const uint8_t leftPadValue, const uint8_t rightPadValue,
                                    T padValue)
        : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue), paddingValue(padValue) {}
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    T paddingValue = 0;
};

// Older DataCopyPad padding parameters (padding value as a 64-bit integer).
struct DataCopyPadParams {
    __aicore__ DataCopyPadParams() {}
    __aicore__ DataCopyPadParams(const bool isPadValue, const uint8_t leftPadValue, const uint8_t rightPadValue,
                                 const uint64_t padValue)
        : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue), paddingValue(padValue) {}
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    uint64_t paddingValue = 0;
};

}  // namespace AscendC

namespace xbench_twin {

// The hardware moves count * sizeof(T) rounded down to whole 32-byte blocks.
template <class T> uint64_t datacopy_moved_bytes(uint32_t count) {
    uint64_t req = static_cast<uint64_t>(count) * sizeof(T), moved = req / 32 * 32;
    if (moved < req) {
        auto& c = counters();
        c.datacopy_truncated += 1;
        c.datacopy_truncated_bytes += req - moved;
    }
    return moved;
}

inline void check_ub_tensor(AscendC::TPosition pos, const char* api) {
    if (!is_ub_position(pos)) {
        fail("twin-unsupported", cat(api, ": the twin copies between GM and the Unified Buffer only (TPosition ",
                                     position_name(static_cast<int>(pos)), " given)"));
    }
}

// Extent in bytes of `count` blocks of `len` bytes placed `pitch` bytes apart.
inline uint64_t extent(uint64_t count, uint64_t len, uint64_t pitch) { return count ? (count - 1) * pitch + len : 0; }

}  // namespace xbench_twin

namespace AscendC {

// ---------------------------------------------------------------- contiguous DataCopy (count elements)
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count) {
    using namespace xbench_twin;
    const char* api = "DataCopy(GM->UB)";
    check_ub_tensor(dst.xb_pos, api);
    uint64_t moved = datacopy_moved_bytes<T>(count);
    T* d = ub_operand(dst, moved, api, "dst");
    const T* s = src.xb_range(0, moved, api, "source");
    std::memcpy(d, s, moved);
    auto& c = counters();
    c.mte2_bytes += moved;
    c.mte2_instr += 1;
}

template <typename T>
__aicore__ inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count) {
    using namespace xbench_twin;
    const char* api = "DataCopy(UB->GM)";
    check_ub_tensor(src.xb_pos, api);
    uint64_t moved = datacopy_moved_bytes<T>(count);
    const T* s = ub_operand(src, moved, api, "src");
    T* d = dst.xb_range(0, moved, api, "destination");
    std::memcpy(d, s, moved);
    auto& c = counters();
    c.mte3_bytes += moved;
    c.mte3_instr += 1;
}

template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count) {
    using namespace xbench_twin;
    const char* api = "DataCopy(UB->UB)";
    uint64_t moved = datacopy_moved_bytes<T>(count);
    T* d = ub_operand(dst, moved, api, "dst");
    const T* s = ub_operand(src, moved, api, "src");
    std::memmove(d, s, moved);
    counters().ub_copy_bytes += moved;
}

// ---------------------------------------------------------------- strided DataCopy (DataCopyParams)
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p) {
    using namespace xbench_twin;
    const char* api = "DataCopy(GM->UB, DataCopyParams)";
    check_ub_tensor(dst.xb_pos, api);
    if (p.blockCount == 0 || p.blockLen == 0) return;
    uint64_t len = p.blockLen * 32ull, sp = (p.blockLen + p.srcStride) * 32ull, dp = (p.blockLen + p.dstStride) * 32ull;
    auto* d = reinterpret_cast<uint8_t*>(ub_operand(dst, extent(p.blockCount, len, dp), api, "dst"));
    auto* s = reinterpret_cast<const uint8_t*>(src.xb_range(0, extent(p.blockCount, len, sp), api, "source"));
    for (uint64_t i = 0; i < p.blockCount; ++i) std::memcpy(d + i * dp, s + i * sp, len);
    auto& c = counters();
    c.mte2_bytes += len * p.blockCount;
    c.mte2_instr += 1;
}

template <typename T>
__aicore__ inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
    using namespace xbench_twin;
    const char* api = "DataCopy(UB->GM, DataCopyParams)";
    check_ub_tensor(src.xb_pos, api);
    if (p.blockCount == 0 || p.blockLen == 0) return;
    uint64_t len = p.blockLen * 32ull, sp = (p.blockLen + p.srcStride) * 32ull, dp = (p.blockLen + p.dstStride) * 32ull;
    auto* s = reinterpret_cast<const uint8_t*>(ub_operand(src, extent(p.blockCount, len, sp), api, "src"));
    auto* d = reinterpret_cast<uint8_t*>(dst.xb_range(0, extent(p.blockCount, len, dp), api, "destination"));
    for (uint64_t i = 0; i < p.blockCount; ++i) std::memcpy(d + i * dp, s + i * sp, len);
    auto& c = counters();
    c.mte3_bytes += len * p.blockCount;
    c.mte3_instr += 1;
}

template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
    using namespace xbench_twin;
    const char* api = "DataCopy(UB->UB, DataCopyParams)";
    if (p.blockCount == 0 || p.blockLen == 0) return;
    uint64_t len = p.blockLen * 32ull, sp = (p.blockLen + p.srcStride) * 32ull, dp = (p.blockLen + p.dstStride) * 32ull;
    auto* s = reinterpret_cast<const uint8_t*>(ub_operand(src, extent(p.blockCount, len, sp), api, "src"));
    auto* d = reinterpret_cast<uint8_t*>(ub_operand(dst, extent(p.blockCount, len, dp), api, "dst"));
    for (uint64_t i = 0; i < p.blockCount; ++i) std::memmove(d + i * dp, s + i * sp, len);
    counters().ub_copy_bytes += len * p.blockCount;
}

// ---------------------------------------------------------------- DataCopyPad (unaligned, exact)
template <typename T>
__aicore__ inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                                   const DataCopyPadExtParams<T>& pad) {
    using namespace xbench_twin;
    const char* api = "DataCopyPad(GM->UB)";
    check_ub_tensor(dst.xb_pos, api);
    if (p.blockCount == 0 || p.blockLen == 0) return;
    const uint64_t sz = sizeof(T);
    if (p.blockLen % sz != 0) {
        fail("datacopy-params", cat(api, ": blockLen ", p.blockLen, " bytes is not a multiple of sizeof(",
                                    type_name<T>(), ") = ", sz, "; blockLen counts bytes (elements * sizeof(T))"));
    }
    if (pad.leftPadding * sz > 32 || pad.rightPadding * sz > 32) {
        fail("datacopy-params", cat(api, ": leftPadding ", static_cast<int>(pad.leftPadding), " / rightPadding ",
                                    static_cast<int>(pad.rightPadding), " elements exceed 32 bytes of ", type_name<T>()));
    }
    const uint64_t left = pad.leftPadding * sz, right = pad.rightPadding * sz;
    const uint64_t row = round_up(left + p.blockLen + right, 32);
    const uint64_t dp = row + static_cast<uint64_t>(p.dstStride) * 32, sp = p.blockLen + static_cast<uint64_t>(p.srcStride);
    auto* d = reinterpret_cast<uint8_t*>(ub_operand(dst, extent(p.blockCount, row, dp), api, "dst"));
    auto* s = reinterpret_cast<const uint8_t*>(src.xb_range(0, extent(p.blockCount, p.blockLen, sp), api, "source"));
    auto fill = [](uint8_t* at, uint64_t bytes, T value) {
        for (uint64_t k = 0; k < bytes; k += sizeof(T)) std::memcpy(at + k, &value, sizeof(T));
    };
    for (uint64_t i = 0; i < p.blockCount; ++i) {
        uint8_t* r = d + i * dp;
        std::memcpy(r + left, s + i * sp, p.blockLen);
        const uint64_t used = left + p.blockLen + right;
        if (left == 0 && right == 0) {
            T first;
            std::memcpy(&first, r, sizeof(T));
            fill(r + used, row - used, first);  // dummy fill repeats the block's first element
        } else if (pad.isPad) {
            fill(r, left, pad.paddingValue);
            fill(r + left + p.blockLen, row - left - p.blockLen, pad.paddingValue);
        }  // else: padding and dummy bytes keep whatever the UB held (undefined on the device)
    }
    auto& c = counters();
    c.mte2_bytes += static_cast<uint64_t>(p.blockLen) * p.blockCount;
    c.mte2_instr += 1;
}

template <typename T>
__aicore__ inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p) {
    using namespace xbench_twin;
    const char* api = "DataCopyPad(UB->GM)";
    check_ub_tensor(src.xb_pos, api);
    if (p.blockCount == 0 || p.blockLen == 0) return;
    if (p.blockLen % sizeof(T) != 0) {
        fail("datacopy-params", cat(api, ": blockLen ", p.blockLen, " bytes is not a multiple of sizeof(",
                                    type_name<T>(), ") = ", sizeof(T)));
    }
    const uint64_t sp = round_up(p.blockLen, 32) + static_cast<uint64_t>(p.srcStride) * 32;
    const uint64_t dp = p.blockLen + static_cast<uint64_t>(p.dstStride);
    auto* s = reinterpret_cast<const uint8_t*>(ub_operand(src, extent(p.blockCount, p.blockLen, sp), api, "src"));
    auto* d = reinterpret_cast<uint8_t*>(dst.xb_range(0, extent(p.blockCount, p.blockLen, dp), api, "destination"));
    for (uint64_t i = 0; i < p.blockCount; ++i) std::memcpy(d + i * dp, s + i * sp, p.blockLen);
    auto& c = counters();
    c.mte3_bytes += static_cast<uint64_t>(p.blockLen) * p.blockCount;
    c.mte3_instr += 1;
}

// Older forms taking DataCopyParams (blockLen in bytes here, as for DataCopyExtParams).
template <typename T>
__aicore__ inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p,
                                   const DataCopyPadParams& pad) {
    DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0),
                DataCopyPadExtParams<T>(pad.isPad, pad.leftPadding, pad.rightPadding,
                                        static_cast<T>(static_cast<double>(pad.paddingValue))));
}

template <typename T>
__aicore__ inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p) {
    DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0));
}

}  // namespace AscendC

#endif  // XBENCH_TWIN_DATACOPY_H
