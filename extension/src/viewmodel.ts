/**
 * Turns an operator record into the strings and flags the sidebar shows.
 */
import { BackendResult, OperatorRecord, Status } from './protocol';

export interface Chip {
  backend: string;
  status: Status;
  predicted: boolean;
  /** The chip's text, e.g. "cuda ✓" or "ascend ✓ predicted". */
  label: string;
  /** Tooltip: timing, error and message. */
  title: string;
}

export interface OperatorRow {
  name: string;
  signature: string;
  dims: string;
  chips: Chip[];
  /** The fastest measured time and its backend ("—" when nothing was measured). */
  best: string;
  /** Predicted times, each with the target it is for (never ranked against the measured ones). */
  predicted: string;
  registers: string;
  ubBytes: string;
}

const STATUS_MARK: Record<Status, string> = { pass: '✓', fail: '✗', error: '!' };

/** Milliseconds with three significant digits, switching to µs below 0.1 ms. */
export function formatTime(ms: number | null): string {
  if (ms === null) {
    return '—';
  }
  if (ms < 0.1) {
    return `${(ms * 1000).toPrecision(3)} µs`;
  }
  return `${ms.toPrecision(3)} ms`;
}

/** Bytes in B, KiB or MiB (binary units, as the Unified Buffer size is quoted). */
export function formatBytes(bytes: number | null): string {
  if (bytes === null) {
    return '—';
  }
  if (bytes < 1024) {
    return `${bytes} B`;
  }
  if (bytes < 1024 * 1024) {
    return `${(bytes / 1024).toFixed(1)} KiB`;
  }
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

function chipTitle(backend: string, result: BackendResult): string {
  const parts = [`${backend}: ${result.status}${result.predicted ? ' (predicted time)' : ''}`];
  if (result.time_ms !== null) {
    const where = result.predicted && result.target ? ` on ${result.target}` : '';
    parts.push(`time ${formatTime(result.time_ms)}${where}`);
  }
  if (result.max_abs_error !== null) {
    parts.push(`max |error| ${result.max_abs_error.toExponential(2)}`);
  }
  if (result.message) {
    parts.push(result.message);
  }
  return parts.join('\n');
}

/** The values of one backend-specific column across backends, e.g. "cuda 32". */
function perBackend(
  backends: [string, BackendResult][],
  pick: (result: BackendResult) => number | null,
  format: (value: number) => string
): string {
  const cells = backends
    .filter(([, result]) => pick(result) !== null)
    .map(([backend, result]) => `${backend} ${format(pick(result) as number)}`);
  return cells.length ? cells.join(', ') : '—';
}

export function toRow(record: OperatorRecord): OperatorRow {
  const backends = Object.entries(record.backends);
  const chips = backends.map(([backend, result]) => ({
    backend,
    status: result.status,
    predicted: result.predicted,
    label: `${backend} ${STATUS_MARK[result.status]}${result.predicted ? ' predicted' : ''}`,
    title: chipTitle(backend, result)
  }));
  // Only measured times are ranked: a predicted time is for other hardware.
  let best = '—';
  const bestResult = record.best ? record.backends[record.best.backend] : undefined;
  if (record.best && bestResult && !bestResult.predicted && bestResult.status === 'pass') {
    best = `${formatTime(record.best.time_ms)} on ${record.best.backend}`;
  }
  const predictedCells = backends
    .filter(([, r]) => r.predicted && r.status === 'pass' && r.time_ms !== null)
    .map(([b, r]) => `${b} ${formatTime(r.time_ms)}${r.target ? ` (${r.target})` : ''}`);
  return {
    name: record.name,
    signature: record.signature,
    dims: Object.entries(record.dims)
      .map(([dim, size]) => `${dim}=${size}`)
      .join(', '),
    chips,
    best,
    predicted: predictedCells.length ? predictedCells.join(', ') : '—',
    registers: perBackend(backends, r => r.registers_per_thread, String),
    ubBytes: perBackend(backends, r => r.ub_bytes, formatBytes)
  };
}
