import { parseRecord } from '../protocol';
import { formatBytes, formatTime, toRow } from '../viewmodel';
import { softmaxWire } from './fixtures';

describe('toRow', () => {
  const row = toRow(parseRecord(softmaxWire()));

  it('shows one chip per backend with its status and the predicted label', () => {
    expect(row.chips.map(chip => chip.label)).toEqual(['cpu ✓', 'cuda ✓ predicted', 'ascend ✗']);
    expect(row.chips.map(chip => chip.status)).toEqual(['pass', 'pass', 'fail']);
    expect(row.chips[2].title).toBe('ascend: fail\nmax |error| 5.00e-1\nrow 3 differs from the reference');
    expect(row.chips[1].title).toBe('cuda: pass (predicted time)\ntime 41.3 µs on h100\nmax |error| 1.19e-7');
  });

  it('ranks only measured times, and lists predicted ones with their target', () => {
    expect(row.best).toBe('1.82 ms on cpu');
    expect(row.predicted).toBe('cuda 41.3 µs (h100)');
    // a record (of an older kernel) whose best names a predicted time: it is not shown as the best
    const wire = softmaxWire();
    wire.best = { backend: 'cuda', time_ms: 0.04125 };
    expect(toRow(parseRecord(wire)).best).toBe('—');
  });

  it('shows no pass after a run that raised', () => {
    const wire = softmaxWire();
    for (const result of Object.values(wire.backends as Record<string, any>)) {
      Object.assign(result, { status: 'error', time_ms: null, message: 'the last run of its cell raised: ...' });
    }
    wire.best = null;
    const row = toRow(parseRecord(wire));
    expect(row.chips.map(chip => chip.label)).toEqual(['cpu !', 'cuda ! predicted', 'ascend !']);
    expect([row.best, row.predicted]).toEqual(['—', '—']);
  });

  it('formats registers, UB bytes and dims', () => {
    expect(row.registers).toBe('cuda 32');
    expect(row.ubBytes).toBe('ascend 48.0 KiB');
    expect(row.dims).toBe('N=64, D=1024');
  });

  it('uses a dash when nothing is known', () => {
    const wire = softmaxWire();
    wire.best = null;
    for (const result of Object.values(wire.backends as Record<string, any>)) {
      result.registers_per_thread = null;
      result.ub_bytes = null;
    }
    const empty = toRow(parseRecord(wire));
    expect([empty.best, empty.registers, empty.ubBytes]).toEqual(['—', '—', '—']);
  });
});

describe('formatters', () => {
  it('formats times and byte counts', () => {
    expect(formatTime(1.8234)).toBe('1.82 ms');
    expect(formatTime(0.1)).toBe('0.100 ms');
    expect(formatTime(0.05)).toBe('50.0 µs');
    expect(formatTime(null)).toBe('—');
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(192 * 1024)).toBe('192.0 KiB');
    expect(formatBytes(3 * 1024 * 1024)).toBe('3.0 MiB');
  });
});
