"""A realistic operator record, shared by the registry, comm and kernel tests."""
from __future__ import annotations

import copy
from typing import Any

ASCEND_SOURCE = """\
#include "kernel_operator.h"
using namespace AscendC;

class KernelSoftmax {
public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, uint32_t rows, uint32_t cols);
    __aicore__ inline void Process();
private:
    TPipe pipe;
    TQue<QuePosition::VECIN, 2> inQueue;
    TQue<QuePosition::VECOUT, 2> outQueue;
};
"""

SOFTMAX: dict[str, Any] = {
    "name": "softmax",
    "signature": "softmax(x: Tensor[N, D]) -> Tensor[N, D]",
    "dims": {"N": 64, "D": 1024},
    "backends": {
        "cpu": {"status": "pass", "time_ms": 1.8234, "max_abs_error": 5.96e-8},
        "cuda": {"status": "pass", "time_ms": 0.04125, "max_abs_error": 1.19e-7,
                 "registers_per_thread": 32, "predicted": True, "target": "h100"},
        "ascend": {"status": "pass", "time_ms": 0.0871, "max_abs_error": 2.4e-7,
                   "ub_bytes": 49152, "predicted": True, "target": "ascend-910b"},
    },
    "best": {"backend": "cpu", "time_ms": 1.8234},
    "sources": {
        "cpu": "@numba.njit(parallel=True)\ndef softmax_kernel(x, out):\n    ...\n",
        "cuda": "@cuda.jit\ndef softmax_kernel(x, out):\n    row = cuda.blockIdx.x\n",
        "ptx": ".version 8.5\n.target sm_80\n.visible .entry softmax_kernel(\n",
        "ascend": ASCEND_SOURCE,
    },
}


def softmax(**changes: Any) -> dict[str, Any]:
    record = copy.deepcopy(SOFTMAX)
    record.update(changes)
    return record
