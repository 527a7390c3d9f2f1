// Deliberately broken kernels: each breaks one hardware rule the twin must report (test_ascend_twin_rules.py).
#include "kernel_operator.h"

using namespace AscendC;

// Two 100000-byte VECIN buffers: 200000 bytes > 196608 bytes of UB.
extern "C" __global__ __aicore__ void ub_overflow(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECOUT, 1> small;
    TQue<QuePosition::VECIN, 2> big;
    pipe.InitBuffer(small, 1, 1000);
    pipe.InitBuffer(big, 2, 100000);
}

// Ten VECIN buffers from five double-buffered queues: more than the 8 synchronisation events allow.
extern "C" __global__ __aicore__ void too_many_que_buffers(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECIN, 2> q0, q1, q2, q3, q4;
    pipe.InitBuffer(q0, 2, 256);
    pipe.InitBuffer(q1, 2, 256);
    pipe.InitBuffer(q2, 2, 256);
    pipe.InitBuffer(q3, 2, 256);
    pipe.InitBuffer(q4, 2, 256);
}

// A vector operand 3 floats (12 bytes) into its buffer.
extern "C" __global__ __aicore__ void misaligned_add(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 3 * 256 * sizeof(float));
    LocalTensor<float> t = buf.Get<float>();
    Duplicate(t, 1.0f, 3 * 256);
    Add(t[3], t[256], t[512], 64);
}

// DataCopy of 1003 floats: 4012 bytes is not a multiple of 32, so 1000 elements move each way.
extern "C" __global__ __aicore__ void copy_tail_truncated(GM_ADDR x, GM_ADDR y) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 1024 * sizeof(float));
    GlobalTensor<float> xGm, yGm;
    xGm.SetGlobalBuffer((__gm__ float*)x, 1003);
    yGm.SetGlobalBuffer((__gm__ float*)y, 1003);
    LocalTensor<float> t = buf.Get<float>();
    DataCopy(t, xGm, 1003);
    Muls(t, t, 2.0f, 1003);
    DataCopy(yGm, t, 1003);
}

extern "C" __global__ __aicore__ void deque_empty(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 2, 256);
    LocalTensor<float> a = q.AllocTensor<float>();
    q.EnQue(a);
    LocalTensor<float> b = q.DeQue<float>();
    LocalTensor<float> c = q.DeQue<float>();  // nothing left in the queue
    (void)b;
    (void)c;
}

extern "C" __global__ __aicore__ void free_twice(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECOUT, 1> q;
    pipe.InitBuffer(q, 2, 256);
    LocalTensor<float> a = q.AllocTensor<float>();
    q.FreeTensor(a);
    q.FreeTensor(a);
}

extern "C" __global__ __aicore__ void free_foreign(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q1, q2;
    pipe.InitBuffer(q1, 1, 256);
    pipe.InitBuffer(q2, 1, 256);
    LocalTensor<float> a = q1.AllocTensor<float>();
    q2.FreeTensor(a);
}

extern "C" __global__ __aicore__ void alloc_exhausted(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 1, 256);
    LocalTensor<float> a = q.AllocTensor<float>();
    LocalTensor<float> b = q.AllocTensor<float>();  // the only buffer is still out
    (void)a;
    (void)b;
}

extern "C" __global__ __aicore__ void enque_unallocated(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECOUT, 1> q;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(q, 1, 256);
    pipe.InitBuffer(buf, 256);
    LocalTensor<float> t = buf.Get<float>();
    q.EnQue(t);
}

extern "C" __global__ __aicore__ void enque_full(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;  // depth 1: one tensor in the queue at a time
    pipe.InitBuffer(q, 2, 256);
    LocalTensor<float> a = q.AllocTensor<float>();
    LocalTensor<float> b = q.AllocTensor<float>();
    q.EnQue(a);
    q.EnQue(b);
}

extern "C" __global__ __aicore__ void use_after_free(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECOUT, 1> q;
    pipe.InitBuffer(q, 1, 256);
    LocalTensor<float> a = q.AllocTensor<float>();
    q.FreeTensor(a);
    Duplicate(a, 0.0f, 64);
}

// 128 floats asked of a 64-float (256-byte) queue buffer.
extern "C" __global__ __aicore__ void ub_out_of_bounds(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECOUT, 1> q;
    pipe.InitBuffer(q, 1, 256);
    LocalTensor<float> a = q.AllocTensor<float>();
    Duplicate(a, 0.0f, 128);
}

// Each block claims 1024 elements of a 4096-element argument: block 4 of 5 runs off its end.
extern "C" __global__ __aicore__ void gm_block_overrun(GM_ADDR x) {
    GlobalTensor<float> xGm;
    xGm.SetGlobalBuffer((__gm__ float*)x + 1024 * GetBlockIdx(), 1024);
}

// The tile loop reads one tile past the SetGlobalBuffer length.
extern "C" __global__ __aicore__ void gm_read_overrun(GM_ADDR x) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 256 * sizeof(float));
    GlobalTensor<float> xGm;
    xGm.SetGlobalBuffer((__gm__ float*)x, 1000);
    LocalTensor<float> t = buf.Get<float>();
    for (uint32_t i = 0; i <= 1000 / 256; ++i) DataCopy(t, xGm[i * 256], 256);
}

// Only block 2 breaks a rule.
extern "C" __global__ __aicore__ void fails_on_block_2(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 1, 256);
    if (GetBlockIdx() == 2) {
        LocalTensor<float> t = q.DeQue<float>();
        (void)t;
    }
}

// The work area of ReduceMax is smaller than the documented minimum.
extern "C" __global__ __aicore__ void reduce_small_work(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TBuf<TPosition::VECCALC> src, work, dst;
    pipe.InitBuffer(src, 4096 * sizeof(float));
    pipe.InitBuffer(work, 32);
    pipe.InitBuffer(dst, 32);
    LocalTensor<float> s = src.Get<float>();
    Duplicate(s, 1.0f, 4096);
    ReduceMax(dst.Get<float>(), s, work.Get<float>(), 4096);
}

// Cast half -> float is exact: only CAST_NONE is accepted.
extern "C" __global__ __aicore__ void cast_bad_mode(GM_ADDR x) {
    (void)x;
    TPipe pipe;
    TBuf<TPosition::VECCALC> a, b;
    pipe.InitBuffer(a, 256);
    pipe.InitBuffer(b, 512);
    LocalTensor<half> h = a.Get<half>();
    Duplicate(h, static_cast<half>(1.0f), 128);
    Cast(b.Get<float>(), h, RoundMode::CAST_RINT, 128);
}

// DataCopyPad with a blockLen that is not a whole number of elements.
extern "C" __global__ __aicore__ void pad_bad_blocklen(GM_ADDR x) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 256);
    GlobalTensor<float> xGm;
    xGm.SetGlobalBuffer((__gm__ float*)x, 64);
    DataCopyExtParams p{1, 30, 0, 0, 0};
    DataCopyPadExtParams<float> pad{false, 0, 0, 0.0f};
    DataCopyPad(buf.Get<float>(), xGm, p, pad);
}

#ifdef XBENCH_TWIN
XBENCH_TWIN_LAUNCH(ub_overflow)
XBENCH_TWIN_LAUNCH(too_many_que_buffers)
XBENCH_TWIN_LAUNCH(misaligned_add)
XBENCH_TWIN_LAUNCH(copy_tail_truncated)
XBENCH_TWIN_LAUNCH(deque_empty)
XBENCH_TWIN_LAUNCH(free_twice)
XBENCH_TWIN_LAUNCH(free_foreign)
XBENCH_TWIN_LAUNCH(alloc_exhausted)
XBENCH_TWIN_LAUNCH(enque_unallocated)
XBENCH_TWIN_LAUNCH(enque_full)
XBENCH_TWIN_LAUNCH(use_after_free)
XBENCH_TWIN_LAUNCH(ub_out_of_bounds)
XBENCH_TWIN_LAUNCH(gm_block_overrun)
XBENCH_TWIN_LAUNCH(gm_read_overrun)
XBENCH_TWIN_LAUNCH(fails_on_block_2)
XBENCH_TWIN_LAUNCH(reduce_small_work)
XBENCH_TWIN_LAUNCH(cast_bad_mode)
XBENCH_TWIN_LAUNCH(pad_bad_blocklen)
#endif
