// Hand-written Ascend C kernels in the official style, checked against numpy by test_ascend_twin_vector.py.
#include "kernel_operator.h"

using namespace AscendC;

template <class Tiling>
__aicore__ inline void CopyTiling(Tiling* t, GM_ADDR tiling) {
    for (uint32_t i = 0; i < sizeof(Tiling) / sizeof(uint32_t); ++i) {
        reinterpret_cast<uint32_t*>(t)[i] = reinterpret_cast<__gm__ uint32_t*>(tiling)[i];
    }
}

// ------------------------------------------------------------------ double-buffered vector add
constexpr int32_t BUFFER_NUM = 2;
struct AddTiling {
    uint32_t totalLength;
    uint32_t tileNum;
};

template <typename T>
class KernelAdd {
public:
    __aicore__ inline KernelAdd() {}
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t totalLength, uint32_t tileNum) {
        blockLength = totalLength / GetBlockNum();
        this->tileNum = tileNum;
        tileLength = blockLength / tileNum / BUFFER_NUM;
        xGm.SetGlobalBuffer((__gm__ T*)x + blockLength * GetBlockIdx(), blockLength);
        yGm.SetGlobalBuffer((__gm__ T*)y + blockLength * GetBlockIdx(), blockLength);
        zGm.SetGlobalBuffer((__gm__ T*)z + blockLength * GetBlockIdx(), blockLength);
        pipe.InitBuffer(inQueueX, BUFFER_NUM, tileLength * sizeof(T));
        pipe.InitBuffer(inQueueY, BUFFER_NUM, tileLength * sizeof(T));
        pipe.InitBuffer(outQueueZ, BUFFER_NUM, tileLength * sizeof(T));
    }
    __aicore__ inline void Process() {
        int32_t loopCount = tileNum * BUFFER_NUM;
        for (int32_t i = 0; i < loopCount; i++) {
            CopyIn(i);
            Compute();
            CopyOut(i);
        }
    }

private:
    __aicore__ inline void CopyIn(int32_t progress) {
        LocalTensor<T> xLocal = inQueueX.AllocTensor<T>();
        LocalTensor<T> yLocal = inQueueY.AllocTensor<T>();
        DataCopy(xLocal, xGm[progress * tileLength], tileLength);
        DataCopy(yLocal, yGm[progress * tileLength], tileLength);
        inQueueX.EnQue(xLocal);
        inQueueY.EnQue(yLocal);
    }
    __aicore__ inline void Compute() {
        LocalTensor<T> xLocal = inQueueX.DeQue<T>();
        LocalTensor<T> yLocal = inQueueY.DeQue<T>();
        LocalTensor<T> zLocal = outQueueZ.AllocTensor<T>();
        Add(zLocal, xLocal, yLocal, tileLength);
        outQueueZ.EnQue<T>(zLocal);
        inQueueX.FreeTensor(xLocal);
        inQueueY.FreeTensor(yLocal);
    }
    __aicore__ inline void CopyOut(int32_t progress) {
        LocalTensor<T> zLocal = outQueueZ.DeQue<T>();
        DataCopy(zGm[progress * tileLength], zLocal, tileLength);
        outQueueZ.FreeTensor(zLocal);
    }

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX, inQueueY;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueZ;
    GlobalTensor<T> xGm, yGm, zGm;
    uint32_t blockLength = 0, tileNum = 0, tileLength = 0;
};

extern "C" __global__ __aicore__ void add_float(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling) {
    AddTiling t;
    CopyTiling(&t, tiling);
    KernelAdd<float> op;
    op.Init(x, y, z, t.totalLength, t.tileNum);
    op.Process();
}

extern "C" __global__ __aicore__ void add_half(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling) {
    AddTiling t;
    CopyTiling(&t, tiling);
    KernelAdd<half> op;
    op.Init(x, y, z, t.totalLength, t.tileNum);
    op.Process();
}

// ------------------------------------------------------------------ row softmax kept in UB
struct SoftmaxTiling {
    uint32_t rows;
    uint32_t cols;  // multiple of 8 (32-byte rows of float)
};

class KernelSoftmax {
public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, const SoftmaxTiling& t) {
        cols = t.cols;
        rowsPerBlock = t.rows / GetBlockNum();
        uint64_t offset = static_cast<uint64_t>(rowsPerBlock) * cols * GetBlockIdx();
        xGm.SetGlobalBuffer((__gm__ float*)x + offset, rowsPerBlock * cols);
        yGm.SetGlobalBuffer((__gm__ float*)y + offset, rowsPerBlock * cols);
        pipe.InitBuffer(inQueue, BUFFER_NUM, cols * sizeof(float));
        pipe.InitBuffer(outQueue, BUFFER_NUM, cols * sizeof(float));
        pipe.InitBuffer(workBuf, cols * sizeof(float));
        pipe.InitBuffer(scalarBuf, 32);
    }
    __aicore__ inline void Process() {
        for (uint32_t r = 0; r < rowsPerBlock; ++r) {
            LocalTensor<float> in = inQueue.AllocTensor<float>();
            DataCopy(in, xGm[r * cols], cols);
            inQueue.EnQue(in);

            LocalTensor<float> x = inQueue.DeQue<float>();
            LocalTensor<float> y = outQueue.AllocTensor<float>();
            LocalTensor<float> work = workBuf.Get<float>();
            LocalTensor<float> s = scalarBuf.Get<float>();
            ReduceMax(s, x, work, cols);
            float rowMax = s.GetValue(0);
            Adds(y, x, -rowMax, cols);
            Exp(y, y, cols);
            ReduceSum(s, y, work, cols);
            float rowSum = s.GetValue(0);
            Muls(y, y, 1.0f / rowSum, cols);
            outQueue.EnQue(y);
            inQueue.FreeTensor(x);

            LocalTensor<float> out = outQueue.DeQue<float>();
            DataCopy(yGm[r * cols], out, cols);
            outQueue.FreeTensor(out);
        }
    }

private:
    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueue;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueue;
    TBuf<TPosition::VECCALC> workBuf, scalarBuf;
    GlobalTensor<float> xGm, yGm;
    uint32_t cols = 0, rowsPerBlock = 0;
};

extern "C" __global__ __aicore__ void softmax_rows(GM_ADDR x, GM_ADDR y, GM_ADDR tiling) {
    SoftmaxTiling t;
    CopyTiling(&t, tiling);
    KernelSoftmax op;
    op.Init(x, y, t);
    op.Process();
}

// ------------------------------------------------------------------ scale with a DataCopyPad tail
struct ScaleTiling {
    uint32_t length;      // any length
    uint32_t tileLength;  // multiple of 8
};

extern "C" __global__ __aicore__ void scale_tail(GM_ADDR x, GM_ADDR y, GM_ADDR tiling) {
    ScaleTiling t;
    CopyTiling(&t, tiling);
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> inQueue;
    TQue<QuePosition::VECOUT, 1> outQueue;
    pipe.InitBuffer(inQueue, 1, t.tileLength * sizeof(float));
    pipe.InitBuffer(outQueue, 1, t.tileLength * sizeof(float));
    GlobalTensor<float> xGm, yGm;
    xGm.SetGlobalBuffer((__gm__ float*)x, t.length);
    yGm.SetGlobalBuffer((__gm__ float*)y, t.length);
    for (uint32_t start = 0; start < t.length; start += t.tileLength) {
        uint32_t n = t.length - start < t.tileLength ? t.length - start : t.tileLength;
        bool tail = (n * sizeof(float)) % 32 != 0;
        LocalTensor<float> in = inQueue.AllocTensor<float>();
        if (tail) {
            DataCopyExtParams copyParams{1, static_cast<uint32_t>(n * sizeof(float)), 0, 0, 0};
            DataCopyPadExtParams<float> padParams{false, 0, 0, 0};
            DataCopyPad(in, xGm[start], copyParams, padParams);
        } else {
            DataCopy(in, xGm[start], n);
        }
        inQueue.EnQue(in);
        LocalTensor<float> a = inQueue.DeQue<float>();
        LocalTensor<float> b = outQueue.AllocTensor<float>();
        Muls(b, a, 2.0f, n);
        outQueue.EnQue(b);
        inQueue.FreeTensor(a);
        LocalTensor<float> out = outQueue.DeQue<float>();
        if (tail) {
            DataCopyExtParams copyParams{1, static_cast<uint32_t>(n * sizeof(float)), 0, 0, 0};
            DataCopyPad(yGm[start], out, copyParams);
        } else {
            DataCopy(yGm[start], out, n);
        }
        outQueue.FreeTensor(out);
    }
}

// Rows of 13 halves land in 32-byte UB rows: padded with a value, or with the hardware's dummy fill.
struct PadTiling {
    uint32_t rows;
    uint32_t cols;
    uint32_t rightPadding;
    uint32_t isPad;
};

extern "C" __global__ __aicore__ void pad_rows(GM_ADDR x, GM_ADDR padded, GM_ADDR back, GM_ADDR tiling) {
    PadTiling t;
    CopyTiling(&t, tiling);
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 4096);
    GlobalTensor<half> xGm, pGm, bGm;
    xGm.SetGlobalBuffer((__gm__ half*)x, t.rows * t.cols);
    pGm.SetGlobalBuffer((__gm__ half*)padded, t.rows * 16);
    bGm.SetGlobalBuffer((__gm__ half*)back, t.rows * t.cols);
    LocalTensor<half> ub = buf.Get<half>();
    DataCopyExtParams copyParams{static_cast<uint16_t>(t.rows), static_cast<uint32_t>(t.cols * sizeof(half)), 0, 0, 0};
    DataCopyPadExtParams<half> padParams{t.isPad != 0, 0, static_cast<uint8_t>(t.rightPadding), static_cast<half>(-1.0f)};
    DataCopyPad(ub, xGm, copyParams, padParams);
    DataCopy(pGm, ub, t.rows * 16);
    DataCopyPad(bGm, ub, copyParams);
}

// ------------------------------------------------------------------ casts with a run-time rounding mode
struct CastTiling {
    uint32_t n;     // multiple of 16
    uint32_t mode;  // RoundMode value
};

template <typename D, typename S>
__aicore__ inline void CastKernel(GM_ADDR x, GM_ADDR y, GM_ADDR tiling) {
    CastTiling t;
    CopyTiling(&t, tiling);
    TPipe pipe;
    TBuf<TPosition::VECCALC> sBuf, dBuf;
    pipe.InitBuffer(sBuf, t.n * sizeof(S));
    pipe.InitBuffer(dBuf, t.n * sizeof(D));
    GlobalTensor<S> xGm;
    GlobalTensor<D> yGm;
    xGm.SetGlobalBuffer((__gm__ S*)x, t.n);
    yGm.SetGlobalBuffer((__gm__ D*)y, t.n);
    LocalTensor<S> s = sBuf.Get<S>();
    LocalTensor<D> d = dBuf.Get<D>();
    DataCopy(s, xGm, t.n);
    Cast(d, s, static_cast<RoundMode>(t.mode), t.n);
    DataCopy(yGm, d, t.n);
}

extern "C" __global__ __aicore__ void cast_f32_f16(GM_ADDR x, GM_ADDR y, GM_ADDR t) { CastKernel<half, float>(x, y, t); }
extern "C" __global__ __aicore__ void cast_f16_f32(GM_ADDR x, GM_ADDR y, GM_ADDR t) { CastKernel<float, half>(x, y, t); }
extern "C" __global__ __aicore__ void cast_f32_i32(GM_ADDR x, GM_ADDR y, GM_ADDR t) { CastKernel<int32_t, float>(x, y, t); }
extern "C" __global__ __aicore__ void cast_f32_bf16(GM_ADDR x, GM_ADDR y, GM_ADDR t) {
    CastKernel<bfloat16_t, float>(x, y, t);
}

// ------------------------------------------------------------------ Compare + Select = elementwise max
extern "C" __global__ __aicore__ void select_max(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling) {
    uint32_t n = *reinterpret_cast<__gm__ uint32_t*>(tiling);
    TPipe pipe;
    TBuf<TPosition::VECCALC> xb, yb, zb, mb;
    pipe.InitBuffer(xb, n * sizeof(float));
    pipe.InitBuffer(yb, n * sizeof(float));
    pipe.InitBuffer(zb, n * sizeof(float));
    pipe.InitBuffer(mb, n / 8 + 32);
    GlobalTensor<float> xGm, yGm, zGm;
    xGm.SetGlobalBuffer((__gm__ float*)x, n);
    yGm.SetGlobalBuffer((__gm__ float*)y, n);
    zGm.SetGlobalBuffer((__gm__ float*)z, n);
    LocalTensor<float> xl = xb.Get<float>(), yl = yb.Get<float>(), zl = zb.Get<float>();
    LocalTensor<uint8_t> mask = mb.Get<uint8_t>();
    DataCopy(xl, xGm, n);
    DataCopy(yl, yGm, n);
    Compare(mask, xl, yl, CMPMODE::GT, n);
    Select(zl, mask, xl, yl, SELMODE::VSEL_TENSOR_TENSOR_MODE, n);
    DataCopy(zGm, zl, n);
}

// Compares against a scalar + Select in tensor-scalar mode = relu.
extern "C" __global__ __aicore__ void relu_select(GM_ADDR x, GM_ADDR z, GM_ADDR tiling) {
    uint32_t n = *reinterpret_cast<__gm__ uint32_t*>(tiling);
    TPipe pipe;
    TBuf<TPosition::VECCALC> xb, zb, mb;
    pipe.InitBuffer(xb, n * sizeof(half));
    pipe.InitBuffer(zb, n * sizeof(half));
    pipe.InitBuffer(mb, n / 8 + 32);
    GlobalTensor<half> xGm, zGm;
    xGm.SetGlobalBuffer((__gm__ half*)x, n);
    zGm.SetGlobalBuffer((__gm__ half*)z, n);
    LocalTensor<half> xl = xb.Get<half>(), zl = zb.Get<half>();
    LocalTensor<uint8_t> mask = mb.Get<uint8_t>();
    DataCopy(xl, xGm, n);
    Compares(mask, xl, static_cast<half>(0.0f), CMPMODE::GT, n);
    Select(zl, mask, xl, static_cast<half>(0.0f), SELMODE::VSEL_TENSOR_SCALAR_MODE, n);
    DataCopy(zGm, zl, n);
}

// ------------------------------------------------------------------ ReduceMax / ReduceMin with index (half)
extern "C" __global__ __aicore__ void reduce_index(GM_ADDR x, GM_ADDR out, GM_ADDR tiling) {
    uint32_t n = *reinterpret_cast<__gm__ uint32_t*>(tiling);  // multiple of 16
    TPipe pipe;
    TBuf<TPosition::VECCALC> xb, wb, ob;
    pipe.InitBuffer(xb, n * sizeof(half));
    pipe.InitBuffer(wb, n * sizeof(half));
    pipe.InitBuffer(ob, 64);
    GlobalTensor<half> xGm, oGm;
    xGm.SetGlobalBuffer((__gm__ half*)x, n);
    oGm.SetGlobalBuffer((__gm__ half*)out, 32);
    LocalTensor<half> xl = xb.Get<half>(), work = wb.Get<half>(), o = ob.Get<half>();
    DataCopy(xl, xGm, n);
    ReduceMax(o, xl, work, n, true);
    ReduceMin(o[16], xl, work, n, true);
    ReduceSum(o[8], xl, work, n);
    DataCopy(oGm, o, 32);
}

// ------------------------------------------------------------------ one output row per vector API
struct OpsTiling {
    uint32_t n;  // multiple of 16
};

template <typename T>
__aicore__ inline void OpsKernel(GM_ADDR x, GM_ADDR y, GM_ADDR out, GM_ADDR tiling) {
    OpsTiling t;
    CopyTiling(&t, tiling);
    const uint32_t n = t.n;
    constexpr int kRows = 18;
    TPipe pipe;
    TBuf<TPosition::VECCALC> xb, yb, ob;
    pipe.InitBuffer(xb, n * sizeof(T));
    pipe.InitBuffer(yb, n * sizeof(T));
    pipe.InitBuffer(ob, kRows * n * sizeof(T));
    GlobalTensor<T> xGm, yGm, oGm;
    xGm.SetGlobalBuffer((__gm__ T*)x, n);
    yGm.SetGlobalBuffer((__gm__ T*)y, n);
    oGm.SetGlobalBuffer((__gm__ T*)out, kRows * n);
    LocalTensor<T> a = xb.Get<T>(), b = yb.Get<T>(), o = ob.Get<T>();
    DataCopy(a, xGm, n);
    DataCopy(b, yGm, n);
    Add(o[0 * n], a, b, n);
    Sub(o[1 * n], a, b, n);
    Mul(o[2 * n], a, b, n);
    Div(o[3 * n], a, b, n);
    Max(o[4 * n], a, b, n);
    Min(o[5 * n], a, b, n);
    Adds(o[6 * n], a, static_cast<T>(1.5f), n);
    Muls(o[7 * n], a, static_cast<T>(-3.0f), n);
    Maxs(o[8 * n], a, static_cast<T>(0.25f), n);
    Mins(o[9 * n], a, static_cast<T>(0.25f), n);
    Exp(o[10 * n], a, n);
    Abs(o[11 * n], a, n);
    Relu(o[12 * n], a, n);
    Abs(o[13 * n], b, n);  // b > 0 is required by Ln / Sqrt / Rsqrt below, so work on |b|
    Ln(o[14 * n], o[13 * n], n);
    Sqrt(o[15 * n], o[13 * n], n);
    Rsqrt(o[16 * n], o[13 * n], n);
    Reciprocal(o[17 * n], b, n);
    DataCopy(oGm, o, kRows * n);
}

extern "C" __global__ __aicore__ void ops_float(GM_ADDR x, GM_ADDR y, GM_ADDR o, GM_ADDR t) { OpsKernel<float>(x, y, o, t); }
extern "C" __global__ __aicore__ void ops_half(GM_ADDR x, GM_ADDR y, GM_ADDR o, GM_ADDR t) { OpsKernel<half>(x, y, o, t); }

// Duplicate, Axpy (float += half * scalar) and the bitwise ops on int16.
extern "C" __global__ __aicore__ void misc_ops(GM_ADDR xh, GM_ADDR acc, GM_ADDR bits, GM_ADDR out_bits, GM_ADDR tiling) {
    uint32_t n = *reinterpret_cast<__gm__ uint32_t*>(tiling);  // multiple of 16
    TPipe pipe;
    TBuf<TPosition::VECCALC> hb, fb, ib, ob;
    pipe.InitBuffer(hb, n * sizeof(half));
    pipe.InitBuffer(fb, n * sizeof(float));
    pipe.InitBuffer(ib, n * sizeof(int16_t));
    pipe.InitBuffer(ob, 4 * n * sizeof(int16_t));
    GlobalTensor<half> hGm;
    GlobalTensor<float> fGm;
    GlobalTensor<int16_t> iGm, oGm;
    hGm.SetGlobalBuffer((__gm__ half*)xh, n);
    fGm.SetGlobalBuffer((__gm__ float*)acc, n);
    iGm.SetGlobalBuffer((__gm__ int16_t*)bits, n);
    oGm.SetGlobalBuffer((__gm__ int16_t*)out_bits, 4 * n);
    LocalTensor<half> h = hb.Get<half>();
    LocalTensor<float> f = fb.Get<float>();
    LocalTensor<int16_t> i = ib.Get<int16_t>(), o = ob.Get<int16_t>();
    DataCopy(h, hGm, n);
    DataCopy(f, fGm, n);
    Axpy(f, h, static_cast<half>(2.0f), n);
    DataCopy(fGm, f, n);
    DataCopy(i, iGm, n);
    Duplicate(o, static_cast<int16_t>(0x0F0F), n);
    And(o[n], i, o, n);
    Or(o[2 * n], i, o, n);
    Not(o[3 * n], i, n);
    DataCopy(oGm, o, 4 * n);
}

#ifdef XBENCH_TWIN
XBENCH_TWIN_LAUNCH(add_float)
XBENCH_TWIN_LAUNCH(add_half)
XBENCH_TWIN_LAUNCH(softmax_rows)
XBENCH_TWIN_LAUNCH(scale_tail)
XBENCH_TWIN_LAUNCH(pad_rows)
XBENCH_TWIN_LAUNCH(cast_f32_f16)
XBENCH_TWIN_LAUNCH(cast_f16_f32)
XBENCH_TWIN_LAUNCH(cast_f32_i32)
XBENCH_TWIN_LAUNCH(cast_f32_bf16)
XBENCH_TWIN_LAUNCH(select_max)
XBENCH_TWIN_LAUNCH(relu_select)
XBENCH_TWIN_LAUNCH(reduce_index)
XBENCH_TWIN_LAUNCH(ops_float)
XBENCH_TWIN_LAUNCH(ops_half)
XBENCH_TWIN_LAUNCH(misc_ops)
#endif
