/**
 * The main-area panel that shows an operator's generated sources, one read-only editor per backend.
 */
import { CodeEditor, CodeEditorWrapper } from '@jupyterlab/codeeditor';
import { MainAreaWidget } from '@jupyterlab/apputils';
import { TabPanel, Widget } from '@lumino/widgets';

import { KernelBridge } from './bridge';
import { xbenchIcon } from './icon';
import { SOURCE_LABELS, SOURCE_MIME_TYPES, SourceKind } from './protocol';
import { RegistryState } from './store';

class SourceTab extends CodeEditorWrapper {
  constructor(kind: SourceKind, factory: CodeEditor.Factory) {
    const model = new CodeEditor.Model({ mimeType: SOURCE_MIME_TYPES[kind] });
    model.sharedModel.setSource('Loading…');
    super({ factory, model, editorOptions: { config: { readOnly: true, lineNumbers: true } } });
    this.kind = kind;
    this.addClass('xb-SourceTab');
    this.node.dataset.kind = kind;
    this.title.label = SOURCE_LABELS[kind];
  }

  show_(text: string): void {
    this.model.sharedModel.setSource(text);
  }

  dispose(): void {
    const model = this.model;
    super.dispose();
    model.dispose();
  }

  readonly kind: SourceKind;
}

export class SourcesView extends TabPanel {
  constructor(bridge: KernelBridge, name: string, factory: CodeEditor.Factory) {
    super();
    this.addClass('xb-Sources');
    this._bridge = bridge;
    this._name = name;
    this._factory = factory;
    bridge.changed.connect(this._onChanged, this);
    this._load();
  }

  get operatorName(): string {
    return this._name;
  }

  get bridge(): KernelBridge {
    return this._bridge;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._bridge.changed.disconnect(this._onChanged, this);
    super.dispose();
  }

  /** Re-fetch when the kernel republishes the operator (a recompilation changes its sources). */
  private _onChanged(_: KernelBridge, state: RegistryState): void {
    const record = state.operators.find(op => op.name === this._name);
    if (!record) {
      if (state.connection === 'ready') {
        this.title.label = `${this._name} (removed)`;
      }
      return;
    }
    if (record.updated !== this._updated) {
      this._load();
    }
  }

  private _load(): void {
    const record = this._bridge.operator(this._name);
    this.title.label = `${this._name} sources`;
    const selected = (this.currentWidget as SourceTab | null)?.kind;
    for (const widget of Array.from(this.widgets)) {
      widget.dispose();
    }
    if (!record) {
      const note = new Widget();
      note.addClass('xb-Sources-empty');
      note.node.textContent = `The kernel holds no operator named ${this._name}.`;
      note.title.label = 'none';
      this.addWidget(note);
      this._updated = undefined;
      return;
    }
    this._updated = record.updated;
    if (record.source_kinds.length === 0) {
      const note = new Widget();
      note.addClass('xb-Sources-empty');
      note.node.textContent = `No generated source was published for ${this._name}.`;
      note.title.label = 'none';
      this.addWidget(note);
      return;
    }
    for (const kind of record.source_kinds) {
      const tab = new SourceTab(kind, this._factory);
      this.addWidget(tab);
      this._bridge.requestSource(this._name, kind).then(
        text => tab.isDisposed || tab.show_(text),
        (error: Error) => tab.isDisposed || tab.show_(`Could not load the ${SOURCE_LABELS[kind]} source: ${error.message}`)
      );
      if (kind === selected) {
        this.currentWidget = tab;
      }
    }
  }

  private _bridge: KernelBridge;
  private _name: string;
  private _factory: CodeEditor.Factory;
  private _updated: string | undefined;
}

export function createSourcesWidget(
  bridge: KernelBridge,
  name: string,
  factory: CodeEditor.Factory
): MainAreaWidget<SourcesView> {
  const content = new SourcesView(bridge, name, factory);
  const widget = new MainAreaWidget({ content });
  widget.id = `xbench-sources-${name}-${Private.nextId++}`;
  widget.title.icon = xbenchIcon;
  widget.title.label = `${name} sources`;
  widget.title.closable = true;
  content.title.changed.connect(() => {
    widget.title.label = content.title.label;
  });
  return widget;
}

namespace Private {
  export let nextId = 0;
}
