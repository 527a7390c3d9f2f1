// xbench Ascend C twin: host tiling structures shared with kernels.
#ifndef XBENCH_TWIN_KERNEL_TILING_H
#define XBENCH_TWIN_KERNEL_TILING_H

#include <cstdint>

// Matmul tiling: the documented TCubeTiling fields, all int32_t, in the order of the public field table.
// The twin's layout is its own (xbench.backends.ascend.twin.TCubeTiling mirrors it); on a CANN toolkit the
// host tiling API fills the real structure.
#define XBENCH_TWIN_TCUBETILING_FIELDS(X)                                                                  \
    X(usedCoreNum) X(M) X(N) X(Ka) X(Kb) X(singleCoreM) X(singleCoreN) X(singleCoreK) X(baseM) X(baseN)   \
    X(baseK) X(depthA1) X(depthB1) X(stepM) X(stepN) X(stepKa) X(stepKb) X(isBias) X(transLength)          \
    X(iterateOrder) X(dbL0A) X(dbL0B) X(dbL0C) X(shareMode) X(shareL1Size) X(shareL0CSize) X(shareUbSize)  \
    X(batchM) X(batchN) X(singleBatchM) X(singleBatchN) X(mxTypePara)

namespace AscendC {
namespace tiling {
struct TCubeTiling {
#define XBENCH_TWIN_TILING_FIELD_(n) int32_t n;
    XBENCH_TWIN_TCUBETILING_FIELDS(XBENCH_TWIN_TILING_FIELD_)
#undef XBENCH_TWIN_TILING_FIELD_
};
}  // namespace tiling
}  // namespace AscendC

using AscendC::tiling::TCubeTiling;  // the legacy global name

extern "C" __attribute__((weak)) const char* xbench_twin_tcubetiling_fields() {
#define XBENCH_TWIN_TILING_NAME_(n) #n ","
    return XBENCH_TWIN_TCUBETILING_FIELDS(XBENCH_TWIN_TILING_NAME_);
#undef XBENCH_TWIN_TILING_NAME_
}

#endif  // XBENCH_TWIN_KERNEL_TILING_H
