/**
 * The right-side panel: the operators of the active notebook's kernel.
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ReactWidget, UseSignal } from '@jupyterlab/ui-components';
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';
import * as React from 'react';

import { KernelBridge } from './bridge';
import { xbenchIcon } from './icon';
import { emptyText, RegistryState } from './store';
import { OperatorRow, toRow } from './viewmodel';

/**
 * Keeps one KernelBridge per open notebook (re-made when its kernel changes) and exposes the one of
 * the active notebook.
 */
export class NotebookBridges implements IDisposable {
  constructor(tracker: INotebookTracker) {
    this._tracker = tracker;
    tracker.forEach(panel => this._track(panel));
    tracker.widgetAdded.connect((_, panel) => this._track(panel));
    tracker.currentChanged.connect(() => this._changed.emit(), this);
  }

  /** Emits when the active bridge changes or its state changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get current(): KernelBridge | null {
    const panel = this._tracker.currentWidget;
    return (panel && this._bridges.get(panel)) ?? null;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._bridges.forEach(bridge => bridge.dispose());
    this._bridges.clear();
    Signal.clearData(this);
  }

  private _track(panel: NotebookPanel): void {
    const bind = () => {
      this._bridges.get(panel)?.dispose();
      this._bridges.delete(panel);
      const kernel = panel.sessionContext.session?.kernel;
      if (kernel) {
        const bridge = new KernelBridge(kernel);
        bridge.changed.connect(() => {
          if (this._tracker.currentWidget === panel) {
            this._changed.emit();
          }
        });
        this._bridges.set(panel, bridge);
      }
      this._changed.emit();
    };
    panel.sessionContext.kernelChanged.connect(bind);
    panel.disposed.connect(() => {
      panel.sessionContext.kernelChanged.disconnect(bind);
      this._bridges.get(panel)?.dispose();
      this._bridges.delete(panel);
      this._changed.emit();
    });
    bind();
  }

  private _tracker: INotebookTracker;
  private _bridges = new Map<NotebookPanel, KernelBridge>();
  private _changed = new Signal<this, void>(this);
  private _isDisposed = false;
}

function OperatorItem(props: { row: OperatorRow; onOpen: (name: string) => void }): JSX.Element {
  const { row, onOpen } = props;
  return (
    <li className="xb-Operator" data-operator={row.name}>
      <button
        className="xb-Operator-name"
        title={`Show the generated sources of ${row.name}`}
        onClick={() => onOpen(row.name)}
      >
        {row.name}
      </button>
      <code className="xb-Operator-signature">{row.signature}</code>
      {row.dims && <div className="xb-Operator-dims">{row.dims}</div>}
      <div className="xb-Operator-chips">
        {row.chips.map(chip => (
          <span
            key={chip.backend}
            className={`xb-Chip xb-Chip-${chip.status}${chip.predicted ? ' xb-Chip-predicted' : ''}`}
            data-backend={chip.backend}
            data-status={chip.status}
            title={chip.title}
          >
            {chip.label}
          </span>
        ))}
      </div>
      <dl className="xb-Operator-metrics">
        <dt>best measured</dt>
        <dd data-metric="best">{row.best}</dd>
        <dt>predicted</dt>
        <dd data-metric="predicted">{row.predicted}</dd>
        <dt>registers/thread</dt>
        <dd data-metric="registers">{row.registers}</dd>
        <dt>UB bytes</dt>
        <dd data-metric="ub">{row.ubBytes}</dd>
      </dl>
    </li>
  );
}

function RegistryView(props: { state: RegistryState; onOpen: (name: string) => void }): JSX.Element {
  const empty = emptyText(props.state);
  return (
    <>
      <header className="xb-Sidebar-header">xbench operators</header>
      {empty !== null ? (
        <p className="xb-Sidebar-empty">{empty}</p>
      ) : (
        <ul className="xb-Sidebar-list">
          {props.state.operators.map(op => (
            <OperatorItem key={op.name} row={toRow(op)} onOpen={props.onOpen} />
          ))}
        </ul>
      )}
    </>
  );
}

export class XbenchSidebar extends ReactWidget {
  constructor(bridges: NotebookBridges, onOpen: (bridge: KernelBridge, name: string) => void) {
    super();
    this._bridges = bridges;
    this._onOpen = onOpen;
    this.id = 'xbench-sidebar';
    this.addClass('xb-Sidebar');
    this.title.icon = xbenchIcon;
    this.title.caption = 'xbench';
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this._bridges.changed}>
        {() => {
          const bridge = this._bridges.current;
          const state: RegistryState = bridge?.state ?? { connection: 'no-kernel', operators: [] };
          return (
            <RegistryView
              state={state}
              onOpen={name => bridge && this._onOpen(bridge, name)}
            />
          );
        }}
      </UseSignal>
    );
  }

  private _bridges: NotebookBridges;
  private _onOpen: (bridge: KernelBridge, name: string) => void;
}
