import { EditorState, Text } from '@codemirror/state';
import { Decoration } from '@codemirror/view';

import {
  isTensorOpLine,
  LINE_CLASS,
  tensorOpDecorations,
  tensorOpField,
  tensorOpLineNumber
} from '../magic';

function lineNumber(source: string): number | null {
  return tensorOpLineNumber(Text.of(source.split('\n')));
}

/** [from, to, kind] for each decoration. */
function decorations(state: EditorState): [number, number, string][] {
  const out: [number, number, string][] = [];
  const iter = state.field(tensorOpField).iter();
  for (; iter.value; iter.next()) {
    const spec = (iter.value as Decoration).spec;
    out.push([iter.from, iter.to, spec.class ?? spec.widget.constructor.name]);
  }
  return out;
}

describe('isTensorOpLine', () => {
  it.each([
    ['%%tensorop', true],
    ['%%tensorop --backends cpu,cuda', true],
    ['  %%tensorop\t--profile', true],
    ['%%tensoropx', false],
    ['%tensorop', false],
    ['# %%tensorop', false],
    ['x = "%%tensorop"', false]
  ])('%j -> %s', (line, expected) => {
    expect(isTensorOpLine(line)).toBe(expected);
  });
});

describe('tensorOpLineNumber', () => {
  it('finds the magic on the first non-blank line only', () => {
    expect(lineNumber('%%tensorop\ndef f(x): ...')).toBe(1);
    expect(lineNumber('\n   \n%%tensorop --profile\ndef f(x): ...')).toBe(3);
    expect(lineNumber('import numpy\n%%tensorop')).toBeNull();
    expect(lineNumber('')).toBeNull();
  });
});

describe('tensorOpField', () => {
  it('puts a line class at the start and a badge at the end of the magic line', () => {
    const doc = '\n%%tensorop --backends cpu\ndef softmax(x): ...';
    const state = EditorState.create({ doc, extensions: [tensorOpField] });
    const end = doc.indexOf('\ndef');
    expect(decorations(state)).toEqual([
      [1, 1, LINE_CLASS],
      [end, end, 'TensorOpBadge']
    ]);
    expect(tensorOpDecorations(state).size).toBe(2);
  });

  it('follows edits: removing the magic removes the marks, typing it adds them', () => {
    let state = EditorState.create({ doc: '%%tensorop\nx', extensions: [tensorOpField] });
    expect(decorations(state)).toHaveLength(2);
    state = state.update({ changes: { from: 0, to: 2, insert: '#' } }).state;
    expect(state.doc.line(1).text).toBe('#tensorop');
    expect(decorations(state)).toEqual([]);
    state = state.update({ changes: { from: 0, to: 1, insert: '%%' } }).state;
    expect(decorations(state)).toEqual([
      [0, 0, LINE_CLASS],
      [10, 10, 'TensorOpBadge']
    ]);
  });
});
