import { parseKernelMessage, parseRecord, ProtocolError } from '../protocol';
import { softmaxWire } from './fixtures';

describe('parseKernelMessage', () => {
  it('reads a snapshot and orders source kinds as the tabs are shown', () => {
    const message = parseKernelMessage({ type: 'snapshot', operators: [softmaxWire()] });
    expect(message.type).toBe('snapshot');
    if (message.type !== 'snapshot') {
      return;
    }
    const [op] = message.operators;
    expect(op.name).toBe('softmax');
    expect(op.dims).toEqual({ N: 64, D: 1024 });
    expect(op.source_kinds).toEqual(['cpu', 'cuda', 'ptx', 'ascend']);
    expect(op.backends.cuda.registers_per_thread).toBe(32);
    expect(op.backends.cuda.predicted).toBe(true);
    expect(op.backends.ascend.message).toBe('row 3 differs from the reference');
    expect(op.best).toEqual({ backend: 'cpu', time_ms: 1.8234 });
    expect(op.backends.cuda.target).toBe('h100');
    expect(op.backends.cpu.target).toBeNull();
  });

  it('reads update, remove, source and error messages', () => {
    expect(parseKernelMessage({ type: 'remove', name: 'gelu' })).toEqual({ type: 'remove', name: 'gelu' });
    expect(parseKernelMessage({ type: 'source', name: 'gelu', backend: 'ascend', text: 'x' })).toEqual({
      type: 'source',
      name: 'gelu',
      backend: 'ascend',
      text: 'x'
    });
    expect(parseKernelMessage({ type: 'error', name: null, backend: null, message: 'bad' })).toEqual({
      type: 'error',
      name: null,
      backend: null,
      message: 'bad'
    });
    const update = parseKernelMessage({ type: 'update', operator: softmaxWire() });
    expect(update.type === 'update' && update.operator.signature).toBe(
      'softmax(x: Tensor[N, D]) -> Tensor[N, D]'
    );
  });

  it('names the field that is wrong', () => {
    const wire = softmaxWire();
    (wire.backends as any).cuda.status = 'ok';
    expect(() => parseRecord(wire)).toThrow('operator "softmax": backends.cuda.status must be "pass", "fail" or "error"');
    expect(() => parseKernelMessage({ type: 'hello' })).toThrow(ProtocolError);
    expect(() => parseKernelMessage({ type: 'source', name: 'a', backend: 'tpu', text: '' })).toThrow(
      'source.backend must be one of cpu, cuda, ptx, ascend'
    );
    const noSignature = softmaxWire();
    delete noSignature.signature;
    expect(() => parseRecord(noSignature)).toThrow('operator "softmax": signature must be a string');
  });
});
