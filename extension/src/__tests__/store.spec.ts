import { emptyText, INITIAL_STATE, reduce, RegistryState } from '../store';
import { record } from './fixtures';

function names(state: RegistryState): string[] {
  return state.operators.map(op => op.name);
}

describe('reduce', () => {
  it('goes from no kernel to waiting to not-loaded when the kernel refuses the control comm', () => {
    let state = reduce(INITIAL_STATE, { kind: 'kernel', present: true });
    expect(state.connection).toBe('waiting');
    state = reduce(state, { kind: 'control-closed' });
    expect(state.connection).toBe('not-loaded');
    expect(emptyText(state)).toContain('%load_ext xbench');
  });

  it('replaces on snapshot, upserts in place on update, drops on remove', () => {
    let state = reduce(INITIAL_STATE, { kind: 'kernel', present: true });
    state = reduce(state, {
      kind: 'message',
      message: { type: 'snapshot', operators: [record('a'), record('b')] }
    });
    expect(state.connection).toBe('ready');
    expect(names(state)).toEqual(['a', 'b']);

    state = reduce(state, { kind: 'message', message: { type: 'update', operator: record('a', 'later') } });
    expect(names(state)).toEqual(['a', 'b']);
    expect(state.operators[0].updated).toBe('later');

    state = reduce(state, { kind: 'message', message: { type: 'update', operator: record('c') } });
    expect(names(state)).toEqual(['a', 'b', 'c']);

    state = reduce(state, { kind: 'message', message: { type: 'remove', name: 'b' } });
    expect(names(state)).toEqual(['a', 'c']);

    state = reduce(state, { kind: 'message', message: { type: 'snapshot', operators: [record('z')] } });
    expect(names(state)).toEqual(['z']);
  });

  it('keeps a loaded registry when a control comm closes, and forgets it on a new kernel', () => {
    let state = reduce(INITIAL_STATE, { kind: 'message', message: { type: 'snapshot', operators: [record('a')] } });
    expect(reduce(state, { kind: 'control-closed' })).toBe(state);
    state = reduce(state, { kind: 'kernel', present: true });
    expect(state).toEqual({ connection: 'waiting', operators: [] });
    expect(reduce(state, { kind: 'kernel', present: false }).connection).toBe('no-kernel');
  });

  it('ignores answers to source requests', () => {
    const state = reduce(INITIAL_STATE, { kind: 'message', message: { type: 'snapshot', operators: [] } });
    const next = reduce(state, { kind: 'message', message: { type: 'source', name: 'a', backend: 'cpu', text: '' } });
    expect(next).toBe(state);
  });

  it('says why the list is empty', () => {
    expect(emptyText(INITIAL_STATE)).toMatch(/No kernel/);
    expect(emptyText({ connection: 'ready', operators: [] })).toMatch(/%%tensorop/);
    expect(emptyText({ connection: 'ready', operators: [record('a')] })).toBeNull();
  });
});
