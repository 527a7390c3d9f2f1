import { OperatorRecord } from '../protocol';

/** A record as `xbench.notebook.registry` sends it (sources stripped, `source_kinds` added). */
export function softmaxWire(): Record<string, unknown> {
  return {
    name: 'softmax',
    signature: 'softmax(x: Tensor[N, D]) -> Tensor[N, D]',
    dims: { N: 64, D: 1024 },
    backends: {
      cpu: {
        status: 'pass',
        time_ms: 1.8234,
        max_abs_error: 5.96e-8,
        message: null,
        registers_per_thread: null,
        ub_bytes: null,
        predicted: false
      },
      cuda: {
        status: 'pass',
        time_ms: 0.04125,
        max_abs_error: 1.19e-7,
        message: null,
        registers_per_thread: 32,
        ub_bytes: null,
        predicted: true,
        target: 'h100'
      },
      ascend: {
        status: 'fail',
        time_ms: null,
        max_abs_error: 0.5,
        message: 'row 3 differs from the reference',
        registers_per_thread: null,
        ub_bytes: 49152,
        predicted: false
      }
    },
    best: { backend: 'cpu', time_ms: 1.8234 },
    source_kinds: ['ascend', 'cpu', 'ptx', 'cuda'],
    updated: '2025-01-01T12:00:00+00:00'
  };
}

export function record(name: string, updated = '2025-01-01T12:00:00+00:00'): OperatorRecord {
  return {
    name,
    signature: `${name}(x: Tensor[N]) -> Tensor[N]`,
    dims: { N: 8 },
    backends: {
      cpu: {
        status: 'pass',
        time_ms: 0.5,
        max_abs_error: 0,
        message: null,
        registers_per_thread: null,
        ub_bytes: null,
        predicted: false,
        target: null
      }
    },
    best: { backend: 'cpu', time_ms: 0.5 },
    source_kinds: ['cpu'],
    updated
  };
}
