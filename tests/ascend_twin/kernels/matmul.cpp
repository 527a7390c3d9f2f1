// Matmul high-level API kernels (fp16 in, fp32 out), checked by test_ascend_twin_matmul.py.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

using namespace AscendC;

__aicore__ inline void CopyTiling(TCubeTiling* t, GM_ADDR tiling) {
    for (uint32_t i = 0; i < sizeof(TCubeTiling) / sizeof(uint32_t); ++i) {
        reinterpret_cast<uint32_t*>(t)[i] = reinterpret_cast<__gm__ uint32_t*>(tiling)[i];
    }
}

using AType = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using BType = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using BTransType = MatmulType<TPosition::GM, CubeFormat::ND, half, true>;
using CType = MatmulType<TPosition::GM, CubeFormat::ND, float>;
using BiasType = MatmulType<TPosition::GM, CubeFormat::ND, float>;

// Block b computes the (b % mBlocks, b / mBlocks) tile of C = A[M, K] @ B[K, N] (+ bias[N]).
extern "C" __global__ __aicore__ void matmul_bias(GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c, GM_ADDR tilingGm) {
    TCubeTiling tiling;
    CopyTiling(&tiling, tilingGm);
    const int32_t mBlocks = (tiling.M + tiling.singleCoreM - 1) / tiling.singleCoreM;
    const int32_t mIdx = GetBlockIdx() % mBlocks, nIdx = GetBlockIdx() / mBlocks;
    const int32_t tailM = tiling.M - mIdx * tiling.singleCoreM, tailN = tiling.N - nIdx * tiling.singleCoreN;

    GlobalTensor<half> aGm, bGm;
    GlobalTensor<float> biasGm, cGm;
    aGm.SetGlobalBuffer((__gm__ half*)a, tiling.M * tiling.Ka);
    bGm.SetGlobalBuffer((__gm__ half*)b, tiling.Kb * tiling.N);
    cGm.SetGlobalBuffer((__gm__ float*)c, tiling.M * tiling.N);
    TPipe pipe;
    Matmul<AType, BType, CType, BiasType> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    mm.SetTensorA(aGm[mIdx * tiling.singleCoreM * tiling.Ka]);
    mm.SetTensorB(bGm[nIdx * tiling.singleCoreN]);
    if (tiling.isBias) {
        biasGm.SetGlobalBuffer((__gm__ float*)bias, tiling.N);
        mm.SetBias(biasGm[nIdx * tiling.singleCoreN]);
    }
    if (tailM < tiling.singleCoreM || tailN < tiling.singleCoreN) {
        mm.SetSingleShape(tailM < tiling.singleCoreM ? tailM : tiling.singleCoreM,
                          tailN < tiling.singleCoreN ? tailN : tiling.singleCoreN, tiling.singleCoreK);
    }
    mm.IterateAll(cGm[mIdx * tiling.singleCoreM * tiling.N + nIdx * tiling.singleCoreN]);
    mm.End();
}

// One block, B stored transposed as [N, K]; the tiling arrives through Init.
extern "C" __global__ __aicore__ void matmul_bt(GM_ADDR a, GM_ADDR bt, GM_ADDR c, GM_ADDR tilingGm) {
    TCubeTiling tiling;
    CopyTiling(&tiling, tilingGm);
    GlobalTensor<half> aGm, bGm;
    GlobalTensor<float> cGm;
    aGm.SetGlobalBuffer((__gm__ half*)a, tiling.M * tiling.Ka);
    bGm.SetGlobalBuffer((__gm__ half*)bt, tiling.N * tiling.Kb);
    cGm.SetGlobalBuffer((__gm__ float*)c, tiling.M * tiling.N);
    TPipe pipe;
    Matmul<AType, BTransType, CType> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm);
    mm.Init(&tiling);
    mm.SetTensorA(aGm);
    mm.SetTensorB(bGm, true);
    mm.IterateAll(cGm);
    mm.End();
}

// The newer direct-launch style: __cube__ entry, tiling passed by value, names through `matmul`.
__global__ __cube__ void matmul_by_value(__gm__ uint8_t* a, __gm__ uint8_t* b, __gm__ uint8_t* c,
                                         AscendC::tiling::TCubeTiling tiling) {
    AscendC::TPipe pipe;
    AscendC::GlobalTensor<half> aGlobal, bGlobal;
    AscendC::GlobalTensor<float> cGlobal;
    aGlobal.SetGlobalBuffer(reinterpret_cast<__gm__ half*>(a), tiling.M * tiling.Ka);
    bGlobal.SetGlobalBuffer(reinterpret_cast<__gm__ half*>(b), tiling.Kb * tiling.N);
    cGlobal.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(c), tiling.M * tiling.N);
    matmul::Matmul<matmul::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half>,
                   matmul::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half>,
                   matmul::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, float>> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    mm.SetOrgShape(tiling.M, tiling.N, tiling.Ka, tiling.Kb);
    mm.SetTensorA(aGlobal);
    mm.SetTensorB(bGlobal);
    mm.IterateAll(cGlobal);
    mm.End();
}

// Broken: transposes B although its MatmulType does not allow it.
extern "C" __global__ __aicore__ void matmul_bt_without_istrans(GM_ADDR a, GM_ADDR bt, GM_ADDR c, GM_ADDR tilingGm) {
    TCubeTiling tiling;
    CopyTiling(&tiling, tilingGm);
    GlobalTensor<half> aGm, bGm;
    GlobalTensor<float> cGm;
    aGm.SetGlobalBuffer((__gm__ half*)a, tiling.M * tiling.Ka);
    bGm.SetGlobalBuffer((__gm__ half*)bt, tiling.N * tiling.Kb);
    cGm.SetGlobalBuffer((__gm__ float*)c, tiling.M * tiling.N);
    TPipe pipe;
    Matmul<AType, BType, CType> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    mm.SetTensorA(aGm);
    mm.SetTensorB(bGm, true);
    mm.IterateAll(cGm);
}

#ifdef XBENCH_TWIN
XBENCH_TWIN_LAUNCH(matmul_bias)
XBENCH_TWIN_LAUNCH(matmul_bt)
XBENCH_TWIN_LAUNCH(matmul_by_value)
XBENCH_TWIN_LAUNCH(matmul_bt_without_istrans)
#endif
