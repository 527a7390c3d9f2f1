// xbench Ascend C twin: the Matmul high-level API (cube unit), as a checked GEMM over ND data in GM.
//
// Supported: Matmul<MatmulType<GM, ND, A>, MatmulType<GM, ND, B>, MatmulType<GM, ND, C>[, MatmulType<GM, ND, Bias>]>
// with A = B in {half, bfloat16_t, float, int8_t}; C in {half, bfloat16_t, float, int32_t}; Bias in
// {half, float, int32_t}. REGIST_MATMUL_OBJ (with or without tiling) or Init(&tiling); SetOrgShape;
// SetSingleShape / SetTail; SetTensorA / SetTensorB (optionally transposed, which needs ISTRANS=true in the
// MatmulType); SetBias / DisableBias / ClearBias; IterateAll(gm, enAtomic); End.
// Not modelled: Iterate/GetTensorC, NZ formats, VECOUT/TSCM sources, batch matmul, quantisation.
//
// IterateAll computes C[m, n] = sum_k A[m, k] * B[k, n] (+ bias[n]) with float accumulation in k order
// (int32 for int8 inputs) and rounds once to C's type. Before computing it checks the tiling against the
// documented rules and the L1 / L0A / L0B / L0C capacities, and counts:
//   cube_macs      singleM * singleN * singleK
//   cube_fractals  16 x 16 x C0 fractal MMADs over the padded base tiles (C0 = 32 / sizeof(A)), i.e. cube cycles
//   mte2_bytes     GM -> L1 traffic: A once when it stays resident in L1 (stepKa*baseK >= singleK and
//                  stepM*baseM >= singleM), else once per N tile (iterateOrder 0) -- and symmetrically for B
//                  with the roles of M and N swapped; plus the bias once
//   fixpipe_bytes  singleM * singleN * sizeof(C) written back to GM
#ifndef XBENCH_TWIN_MATMUL_INTF_H
#define XBENCH_TWIN_MATMUL_INTF_H

#include "kernel_operator.h"
#include "kernel_tiling/kernel_tiling.h"

namespace AscendC {

struct MatmulConfig {
    bool doNorm = true;
    bool doBasicBlock = false;
    bool doMultiDataLoad = false;
    uint32_t basicM = 0, basicN = 0, basicK = 0;
    bool intrinsicsCheck = false;
    bool isNBatch = false;
    bool enVecND2NZ = false;
    bool doSpecialBasicBlock = false;
    uint32_t doMTE2Preload = 0;
    uint32_t singleCoreM = 0, singleCoreN = 0, singleCoreK = 0;
    uint32_t stepM = 0, stepN = 0, baseMN = 0, singleCoreMN = 0;
    bool enUnitFlag = true;
    bool isPerTensor = false, hasAntiQuantOffset = false;
    bool doIBShareNorm = false, doSpecialMDL = false;
    bool enableInit = true;
};
inline constexpr MatmulConfig CFG_NORM{};
inline constexpr MatmulConfig CFG_MDL{false, false, true};
inline constexpr MatmulConfig CFG_IBSHARE_NORM{};

template <TPosition POSITION, CubeFormat FORMAT, typename TYPE, bool ISTRANS = false,
          LayoutMode LAYOUT = LayoutMode::NONE, bool IBSHARE = false, TPosition SRCPOS = TPosition::GM>
struct MatmulType {
    constexpr static TPosition pos = POSITION;
    constexpr static CubeFormat format = FORMAT;
    using T = TYPE;
    constexpr static bool isTrans = ISTRANS;
    constexpr static LayoutMode layout = LAYOUT;
    constexpr static bool ibShare = IBSHARE;
    constexpr static TPosition srcPos = SRCPOS;
};

template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE, const MatmulConfig& MM_CFG = CFG_NORM>
class Matmul {
    using SrcAT = typename A_TYPE::T;
    using SrcBT = typename B_TYPE::T;
    using DstT = typename C_TYPE::T;
    using BiasT = typename BIAS_TYPE::T;
    static constexpr bool kInt = std::is_same_v<SrcAT, int8_t>;
    using AccT = std::conditional_t<kInt, int32_t, float>;

    static_assert(A_TYPE::pos == TPosition::GM && B_TYPE::pos == TPosition::GM && C_TYPE::pos == TPosition::GM &&
                      BIAS_TYPE::pos == TPosition::GM,
                  "the twin's Matmul reads A, B, bias from GM and writes C to GM (TPosition::GM)");
    static_assert(A_TYPE::format == CubeFormat::ND && B_TYPE::format == CubeFormat::ND &&
                      C_TYPE::format == CubeFormat::ND && BIAS_TYPE::format == CubeFormat::ND,
                  "the twin's Matmul supports CubeFormat::ND");
    static_assert(A_TYPE::layout == LayoutMode::NONE, "batch matmul (LayoutMode) is not modelled by the twin");
    static_assert(xbench_twin::one_of_v<SrcAT, half, bfloat16_t, float, int8_t> && std::is_same_v<SrcAT, SrcBT>,
                  "Matmul on Atlas A2: A and B are both half, bfloat16_t, float or int8_t");
    static_assert(kInt ? xbench_twin::one_of_v<DstT, int32_t, half>
                       : xbench_twin::one_of_v<DstT, half, bfloat16_t, float>,
                  "Matmul C type: half / bfloat16_t / float for float inputs, int32_t / half for int8_t inputs");
    static_assert(kInt ? std::is_same_v<BiasT, int32_t> || std::is_same_v<BiasT, DstT>
                       : xbench_twin::one_of_v<BiasT, half, bfloat16_t, float>,
                  "Matmul bias type: float / half for float inputs, int32_t for int8_t inputs");

public:
    __aicore__ inline Matmul() {}

    __aicore__ inline void Init(const TCubeTiling* __restrict cubeTiling, TPipe* tpipe = nullptr) {
        (void)tpipe;
        if (cubeTiling == nullptr) xbench_twin::fail("matmul-usage", "Matmul::Init got a null TCubeTiling pointer");
        xb_t = *cubeTiling;
        xb_has_tiling = true;
        xb_check_tiling();
        xb_orgM = xb_t.M;
        xb_orgN = xb_t.N;
        xb_orgKa = xb_t.Ka;
        xb_orgKb = xb_t.Kb;
        xb_orgKc = 0;
        xb_sM = xb_t.singleCoreM;
        xb_sN = xb_t.singleCoreN;
        xb_sK = xb_t.singleCoreK;
        xb_bias_on = xb_t.isBias != 0;
    }
    __aicore__ inline void SetOrgShape(int orgM, int orgN, int orgK) { SetOrgShape(orgM, orgN, orgK, orgK, 0); }
    __aicore__ inline void SetOrgShape(int orgM, int orgN, int orgKa, int orgKb, int orgKc = 0) {
        xb_orgM = orgM;
        xb_orgN = orgN;
        xb_orgKa = orgKa;
        xb_orgKb = orgKb;
        xb_orgKc = orgKc;
    }
    __aicore__ inline void SetSingleShape(int singleM, int singleN, int singleK) {
        xb_sM = singleM;
        xb_sN = singleN;
        xb_sK = singleK;
    }
    __aicore__ inline void SetTail(int tailM = -1, int tailN = -1, int tailK = -1) {
        if (tailM > 0) xb_sM = tailM;
        if (tailN > 0) xb_sN = tailN;
        if (tailK > 0) xb_sK = tailK;
    }
    __aicore__ inline void SetTensorA(const GlobalTensor<SrcAT>& gm, bool isTransposeA = false) {
        if (isTransposeA && !A_TYPE::isTrans) {
            xbench_twin::fail("matmul-usage", "SetTensorA(gm, true): A may only be transposed when its MatmulType"
                                              " sets ISTRANS=true (MatmulType<GM, ND, T, true>)");
        }
        xb_a = gm;
        xb_ta = isTransposeA;
        xb_has_a = true;
    }
    __aicore__ inline void SetTensorB(const GlobalTensor<SrcBT>& gm, bool isTransposeB = false) {
        if (isTransposeB && !B_TYPE::isTrans) {
            xbench_twin::fail("matmul-usage", "SetTensorB(gm, true): B may only be transposed when its MatmulType"
                                              " sets ISTRANS=true (MatmulType<GM, ND, T, true>)");
        }
        xb_b = gm;
        xb_tb = isTransposeB;
        xb_has_b = true;
    }
    __aicore__ inline void SetBias(const GlobalTensor<BiasT>& biasGlobal) {
        xb_require_tiling("SetBias");
        if (xb_t.isBias == 0) {
            xbench_twin::fail("matmul-usage", "SetBias needs a tiling with isBias = 1 (TCubeTiling::isBias is 0)");
        }
        xb_bias = biasGlobal;
        xb_has_bias = true;
        xb_bias_on = true;
    }
    __aicore__ inline void DisableBias() { xb_bias_on = false; }
    __aicore__ inline void ClearBias() { xb_bias_on = false; }
    __aicore__ inline void SetHF32(bool enableHF32 = false, int32_t transMode = 0) { (void)enableHF32; (void)transMode; }

    template <bool sync = true>
    __aicore__ inline void IterateAll(const GlobalTensor<DstT>& gm, uint8_t enAtomic = 0, bool enSequentialWrite = false,
                                      bool waitIterateAll = false, bool fakeMsg = false) {
        using namespace xbench_twin;
        (void)waitIterateAll;
        if (fakeMsg) return;
        if (enSequentialWrite) fail("twin-unsupported", "IterateAll with enSequentialWrite is not modelled by the twin");
        if (enAtomic > 3) fail("matmul-usage", cat("IterateAll: enAtomic ", static_cast<int>(enAtomic), " is not 0..3"));
        xb_require_tiling("IterateAll");
        if (!xb_has_a || !xb_has_b) fail("matmul-usage", "IterateAll before SetTensorA and SetTensorB");
        const int64_t M = xb_sM, N = xb_sN, K = xb_sK;
        if (M <= 0 || N <= 0 || K <= 0) {
            fail("cube-tiling", cat("IterateAll: single shape M=", M, " N=", N, " K=", K, " must be positive"));
        }
        if (M > xb_orgM || N > xb_orgN || K > xb_orgKa || K > xb_orgKb) {
            fail("cube-tiling", cat("IterateAll: single shape (M=", M, ", N=", N, ", K=", K, ") exceeds the original"
                                    " shape (M=", xb_orgM, ", N=", xb_orgN, ", Ka=", xb_orgKa, ", Kb=", xb_orgKb, ")"));
        }
        xb_check_transposed_limits();
        const int64_t ldc = xb_orgKc > 0 ? xb_orgKc : xb_orgN;
        const char* api = "Matmul::IterateAll";
        const uint64_t sa = sizeof(SrcAT), sb = sizeof(SrcBT), sc = sizeof(DstT);
        const uint64_t a_ext = xb_ta ? (K - 1) * xb_orgM + M : (M - 1) * xb_orgKa + K;
        const uint64_t b_ext = xb_tb ? (N - 1) * xb_orgKb + K : (K - 1) * xb_orgN + N;
        const SrcAT* a = xb_a.xb_range(0, a_ext * sa, api, "A");
        const SrcBT* b = xb_b.xb_range(0, b_ext * sb, api, "B");
        DstT* c = gm.xb_range(0, ((M - 1) * ldc + N) * sc, api, "C");
        const BiasT* bias = nullptr;
        if (xb_bias_on && xb_has_bias) bias = xb_bias.xb_range(0, N * sizeof(BiasT), api, "bias");

        std::vector<AccT> acc(static_cast<size_t>(N));
        for (int64_t m = 0; m < M; ++m) {
            std::fill(acc.begin(), acc.end(), AccT(0));
            for (int64_t k = 0; k < K; ++k) {
                const AccT av = static_cast<AccT>(a[xb_ta ? k * xb_orgM + m : m * xb_orgKa + k]);
                if (xb_tb) {
                    for (int64_t n = 0; n < N; ++n) acc[n] += av * static_cast<AccT>(b[n * xb_orgKb + k]);
                } else {
                    const SrcBT* row = b + k * xb_orgN;
                    for (int64_t n = 0; n < N; ++n) acc[n] += av * static_cast<AccT>(row[n]);
                }
            }
            DstT* out = c + m * ldc;
            for (int64_t n = 0; n < N; ++n) {
                AccT v = acc[n];
                if (bias) v += static_cast<AccT>(bias[n]);
                if (enAtomic == 1) v += static_cast<AccT>(out[n]);
                if (enAtomic == 2) v = std::max(v, static_cast<AccT>(out[n]));
                if (enAtomic == 3) v = std::min(v, static_cast<AccT>(out[n]));
                out[n] = static_cast<DstT>(v);
            }
        }
        xb_count(M, N, K, sa, sb, sc, bias != nullptr);
    }

    __aicore__ inline void End() {}

    // Twin: REGIST_MATMUL_OBJ.
    void xb_register(TPipe* pipe) { xb_pipe = pipe; }

private:
    void xb_require_tiling(const char* api) const {
        if (!xb_has_tiling) {
            xbench_twin::fail("matmul-usage", xbench_twin::cat("Matmul::", api, " before the object has a tiling: pass &tiling"
                                                               " to REGIST_MATMUL_OBJ or call Init(&tiling)"));
        }
    }

    // The TCubeTiling rules from the public documentation, with this core's memory sizes.
    void xb_check_tiling() const {
        using namespace xbench_twin;
        const auto& t = xb_t;
        const auto& cfg = *ctx().cfg;
        std::vector<std::string> bad;
        auto need_pos = [&](const char* n, int32_t v) { if (v <= 0) bad.push_back(cat(n, " = ", v, " must be > 0")); };
        need_pos("M", t.M); need_pos("N", t.N); need_pos("Ka", t.Ka); need_pos("Kb", t.Kb);
        need_pos("singleCoreM", t.singleCoreM); need_pos("singleCoreN", t.singleCoreN); need_pos("singleCoreK", t.singleCoreK);
        need_pos("baseM", t.baseM); need_pos("baseN", t.baseN); need_pos("baseK", t.baseK);
        need_pos("depthA1", t.depthA1); need_pos("depthB1", t.depthB1);
        need_pos("stepM", t.stepM); need_pos("stepN", t.stepN); need_pos("stepKa", t.stepKa); need_pos("stepKb", t.stepKb);
        if (!bad.empty()) xb_tiling_fail(bad);
        if (t.usedCoreNum < 1 || static_cast<uint64_t>(t.usedCoreNum) > cfg.max_cube_cores) {
            bad.push_back(cat("usedCoreNum = ", t.usedCoreNum, " must be in [1, ", cfg.max_cube_cores, "] (cube cores)"));
        }
        if (t.singleCoreM > t.M) bad.push_back(cat("singleCoreM = ", t.singleCoreM, " > M = ", t.M));
        if (t.singleCoreN > t.N) bad.push_back(cat("singleCoreN = ", t.singleCoreN, " > N = ", t.N));
        if (t.singleCoreK > t.Ka || t.singleCoreK > t.Kb) {
            bad.push_back(cat("singleCoreK = ", t.singleCoreK, " exceeds K (Ka = ", t.Ka, ", Kb = ", t.Kb, ")"));
        }
        for (auto [n, v] : {std::pair<const char*, int32_t>{"dbL0A", t.dbL0A}, {"dbL0B", t.dbL0B}, {"dbL0C", t.dbL0C}}) {
            if (v != 1 && v != 2) bad.push_back(cat(n, " = ", v, " must be 1 (single) or 2 (double buffer)"));
        }
        if (t.isBias != 0 && t.isBias != 1) bad.push_back(cat("isBias = ", t.isBias, " must be 0 or 1"));
        if (t.iterateOrder != 0 && t.iterateOrder != 1) bad.push_back(cat("iterateOrder = ", t.iterateOrder, " must be 0 or 1"));
        if (t.baseM % 16) bad.push_back(cat("baseM = ", t.baseM, " is not a multiple of 16 (fractal alignment)"));
        if (t.baseN % 16) bad.push_back(cat("baseN = ", t.baseN, " is not a multiple of 16 (fractal alignment)"));
        const uint64_t sa = sizeof(SrcAT), sb = sizeof(SrcBT), l0c_elem = 4;
        const uint64_t l0a = uint64_t(t.baseM) * t.baseK * sa * std::max(t.dbL0A, 1);
        const uint64_t l0b = uint64_t(t.baseN) * t.baseK * sb * std::max(t.dbL0B, 1);
        const uint64_t l0c = uint64_t(t.baseM) * t.baseN * l0c_elem * std::max(t.dbL0C, 1);
        if (l0a > cfg.l0a_bytes) {
            bad.push_back(cat("L0A: baseM * baseK * sizeof(A) * dbL0A = ", t.baseM, " * ", t.baseK, " * ", sa, " * ",
                              t.dbL0A, " = ", l0a, " bytes > ", cfg.l0a_bytes));
        }
        if (l0b > cfg.l0b_bytes) {
            bad.push_back(cat("L0B: baseN * baseK * sizeof(B) * dbL0B = ", t.baseN, " * ", t.baseK, " * ", sb, " * ",
                              t.dbL0B, " = ", l0b, " bytes > ", cfg.l0b_bytes));
        }
        if (l0c > cfg.l0c_bytes) {
            bad.push_back(cat("L0C: baseM * baseN * 4 * dbL0C = ", t.baseM, " * ", t.baseN, " * 4 * ", t.dbL0C, " = ",
                              l0c, " bytes > ", cfg.l0c_bytes));
        }
        auto depth_ok = [](int32_t depth, int32_t step) { return depth == step || depth == 2 * step; };
        if (!depth_ok(t.depthA1, t.stepM * t.stepKa)) {
            bad.push_back(cat("depthA1 = ", t.depthA1, " must equal stepM * stepKa * db = ", t.stepM, " * ", t.stepKa,
                              " * (1 or 2)"));
        }
        if (!depth_ok(t.depthB1, t.stepN * t.stepKb)) {
            bad.push_back(cat("depthB1 = ", t.depthB1, " must equal stepN * stepKb * db = ", t.stepN, " * ", t.stepKb,
                              " * (1 or 2)"));
        }
        const uint64_t al1 = uint64_t(t.baseM) * t.baseK * t.depthA1 * sa;
        const uint64_t bl1 = uint64_t(t.baseN) * t.baseK * t.depthB1 * sb;
        const uint64_t biasl1 = t.isBias ? uint64_t(t.baseN) * sizeof(BiasT) : 0;
        if (al1 + bl1 + biasl1 > cfg.l1_bytes) {
            bad.push_back(cat("L1: A (baseM*baseK*depthA1*sizeof(A) = ", al1, ") + B (baseN*baseK*depthB1*sizeof(B) = ",
                              bl1, ")", t.isBias ? cat(" + bias (baseN*sizeof(bias) = ", biasl1, ")") : std::string(),
                              " = ", al1 + bl1 + biasl1, " bytes > ", cfg.l1_bytes));
        }
        if (!bad.empty()) xb_tiling_fail(bad);
    }

    [[noreturn]] static void xb_tiling_fail(const std::vector<std::string>& bad) {
        std::string s = "illegal TCubeTiling: ";
        for (size_t i = 0; i < bad.size(); ++i) s += (i ? "; " : "") + bad[i];
        xbench_twin::fail("cube-tiling", s + ".");
    }

    // baseK alignment and the ND size limits depend on whether A / B are transposed.
    void xb_check_transposed_limits() const {
        using namespace xbench_twin;
        const int32_t c0 = static_cast<int32_t>(32 / sizeof(SrcAT));
        const int32_t kalign = (!xb_ta && xb_tb) ? c0 : 16;
        if (xb_t.baseK % kalign) {
            xb_tiling_fail({cat("baseK = ", xb_t.baseK, " is not a multiple of ", kalign, " (",
                                kalign == 16 ? "16 when A is transposed or B is not" : "C0 when only B is transposed", ")")});
        }
        if (!MM_CFG.intrinsicsCheck) {
            if (!xb_ta && xb_orgKa > 65535) xb_tiling_fail({cat("Ka = ", xb_orgKa, " > 65535 for an untransposed ND A needs MatmulConfig::intrinsicsCheck")});
            if (xb_ta && xb_orgM > 65535) xb_tiling_fail({cat("M = ", xb_orgM, " > 65535 for a transposed ND A needs MatmulConfig::intrinsicsCheck")});
            if (!xb_tb && xb_orgN > 65535) xb_tiling_fail({cat("N = ", xb_orgN, " > 65535 for an untransposed ND B needs MatmulConfig::intrinsicsCheck")});
            if (xb_tb && xb_orgKb > 65535) xb_tiling_fail({cat("Kb = ", xb_orgKb, " > 65535 for a transposed ND B needs MatmulConfig::intrinsicsCheck")});
        }
    }

    void xb_count(int64_t M, int64_t N, int64_t K, uint64_t sa, uint64_t sb, uint64_t sc, bool bias) const {
        using namespace xbench_twin;
        auto& c = counters();
        const auto& t = xb_t;
        c.matmul_calls += 1;
        c.cube_macs += static_cast<uint64_t>(M) * N * K;
        const uint64_t c0 = 32 / sa;
        auto fr = [](int64_t len, int64_t base, int64_t unit) -> uint64_t {
            return static_cast<uint64_t>((len / base) * ceil_div(base, unit) + ceil_div(len % base, unit));
        };
        c.cube_fractals += fr(M, t.baseM, 16) * fr(N, t.baseN, 16) * fr(K, t.baseK, c0);
        const uint64_t mT = ceil_div(M, t.baseM), nT = ceil_div(N, t.baseN);
        const bool kFullA = int64_t(t.stepKa) * t.baseK >= K, kFullB = int64_t(t.stepKb) * t.baseK >= K;
        const bool aRes = kFullA && int64_t(t.stepM) * t.baseM >= M, bRes = kFullB && int64_t(t.stepN) * t.baseN >= N;
        uint64_t aLoads, bLoads;
        if (t.iterateOrder == 0) {  // M moves fastest: B's column block stays while A streams past it
            aLoads = aRes ? 1 : nT;
            bLoads = kFullB ? 1 : mT;
        } else {  // N moves fastest
            aLoads = kFullA ? 1 : nT;
            bLoads = bRes ? 1 : mT;
        }
        c.mte2_bytes += aLoads * M * K * sa + bLoads * K * N * sb + (bias ? N * sizeof(BiasT) : 0);
        c.mte2_instr += aLoads + bLoads + (bias ? 1 : 0);
        c.fixpipe_bytes += static_cast<uint64_t>(M) * N * sc;
    }

    TCubeTiling xb_t{};
    bool xb_has_tiling = false, xb_has_a = false, xb_has_b = false, xb_has_bias = false, xb_bias_on = false;
    bool xb_ta = false, xb_tb = false;
    int64_t xb_orgM = 0, xb_orgN = 0, xb_orgKa = 0, xb_orgKb = 0, xb_orgKc = 0;
    int64_t xb_sM = 0, xb_sN = 0, xb_sK = 0;
    GlobalTensor<SrcAT> xb_a;
    GlobalTensor<SrcBT> xb_b;
    GlobalTensor<BiasT> xb_bias;
    TPipe* xb_pipe = nullptr;
};

}  // namespace AscendC

namespace matmul = AscendC;

namespace xbench_twin {
inline const TCubeTiling* tiling_ptr(const TCubeTiling* p) { return p; }
inline const TCubeTiling* tiling_ptr(const TCubeTiling& r) { return &r; }

template <class M>
void regist_matmul(AscendC::TPipe* pipe, GM_ADDR, M& mm) {
    mm.xb_register(pipe);
}
template <class M, class Tiling, class... Rest>
void regist_matmul(AscendC::TPipe* pipe, GM_ADDR ws, M& mm, const Tiling& tiling, Rest&&... rest) {
    mm.xb_register(pipe);
    const TCubeTiling* t = tiling_ptr(tiling);
    if (t != nullptr) mm.Init(t, pipe);
    if constexpr (sizeof...(Rest) > 0) regist_matmul(pipe, ws, rest...);
}
}  // namespace xbench_twin

// REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm[, &tiling][, mm2, &tiling2 ...])
#define REGIST_MATMUL_OBJ(tpipe, workspace, ...) ::xbench_twin::regist_matmul(tpipe, workspace, __VA_ARGS__)

#endif  // XBENCH_TWIN_MATMUL_INTF_H
