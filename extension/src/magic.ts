/**
 * Marks the `%%tensorop` line of a cell in CodeMirror 6: a line class and a badge at its end.
 */
import { EditorState, Extension, RangeSetBuilder, StateField, Text } from '@codemirror/state';
import { Decoration, DecorationSet, EditorView, WidgetType } from '@codemirror/view';

export const MAGIC = '%%tensorop';
export const LINE_CLASS = 'xb-tensorop-line';
export const BADGE_CLASS = 'xb-tensorop-badge';

/**
 * Whether `line` invokes the `%%tensorop` cell magic: the magic name, then whitespace or the end.
 * Leading indentation is allowed (IPython dedents a cell whose first line is indented).
 */
export function isTensorOpLine(line: string): boolean {
  const text = line.replace(/^\s+/, '');
  if (!text.startsWith(MAGIC)) {
    return false;
  }
  const next = text.charAt(MAGIC.length);
  return next === '' || /\s/.test(next);
}

/**
 * The 1-based number of the line that makes `doc` a `%%tensorop` cell, or null. As in IPython, a cell
 * magic must be the first line once leading blank lines are dropped.
 */
export function tensorOpLineNumber(doc: Text): number | null {
  for (let n = 1; n <= doc.lines; n++) {
    const text = doc.line(n).text;
    if (text.trim() === '') {
      continue;
    }
    return isTensorOpLine(text) ? n : null;
  }
  return null;
}

class TensorOpBadge extends WidgetType {
  eq(): boolean {
    return true;
  }

  toDOM(): HTMLElement {
    const badge = document.createElement('span');
    badge.className = BADGE_CLASS;
    badge.textContent = 'xbench operator';
    badge.title = 'This cell compiles a tensor operator with xbench';
    return badge;
  }

  ignoreEvent(): boolean {
    return false;
  }
}

const lineDecoration = Decoration.line({ class: LINE_CLASS });
const badgeDecoration = Decoration.widget({ widget: new TensorOpBadge(), side: 1 });

export function tensorOpDecorations(state: EditorState): DecorationSet {
  const number = tensorOpLineNumber(state.doc);
  const builder = new RangeSetBuilder<Decoration>();
  if (number !== null) {
    const line = state.doc.line(number);
    builder.add(line.from, line.from, lineDecoration);
    builder.add(line.to, line.to, badgeDecoration);
  }
  return builder.finish();
}

export const tensorOpField = StateField.define<DecorationSet>({
  create: state => tensorOpDecorations(state),
  update: (decorations, transaction) =>
    transaction.docChanged ? tensorOpDecorations(transaction.state) : decorations,
  provide: field => EditorView.decorations.from(field)
});

/** The CodeMirror extension to add to cell editors. */
export function tensorOpHighlight(): Extension {
  return tensorOpField;
}
