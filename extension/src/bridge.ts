/**
 * One kernel's side of the protocol in `protocol.ts`: listens on `xbench.registry`, asks on
 * `xbench.control`, and keeps the resulting state.
 */
import type { Kernel, KernelMessage as KM } from '@jupyterlab/services';
import type { JSONObject } from '@lumino/coreutils';
import type { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import {
  CONTROL_TARGET,
  FrontendMessage,
  KernelMessage,
  OperatorRecord,
  parseKernelMessage,
  ProtocolError,
  REGISTRY_TARGET,
  SourceKind
} from './protocol';
import { Action, INITIAL_STATE, reduce, RegistryState } from './store';

/** The part of `Kernel.IKernelConnection` the bridge uses (tests pass a fake). */
export type KernelLike = Pick<
  Kernel.IKernelConnection,
  | 'registerCommTarget'
  | 'removeCommTarget'
  | 'createComm'
  | 'hasComm'
  | 'requestCommInfo'
  | 'connectionStatus'
  | 'connectionStatusChanged'
  | 'statusChanged'
  | 'isDisposed'
>;

type CommLike = Kernel.IComm;

interface Pending {
  resolve: (text: string) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

export const SOURCE_TIMEOUT_MS = 30000;

export class KernelBridge implements IDisposable {
  constructor(kernel: KernelLike) {
    this._kernel = kernel;
    this._onRegistryOpen = this._onRegistryOpen.bind(this);
    kernel.registerCommTarget(REGISTRY_TARGET, this._onRegistryOpen);
    kernel.connectionStatusChanged.connect(this._onConnectionStatus, this);
    kernel.statusChanged.connect(this._onStatus, this);
    this._dispatch({ kind: 'kernel', present: true });
    if (kernel.connectionStatus === 'connected') {
      void this._start();
    }
  }

  /** Emits the new state after every change. */
  get changed(): ISignal<this, RegistryState> {
    return this._changed;
  }

  get state(): RegistryState {
    return this._state;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  operator(name: string): OperatorRecord | undefined {
    return this._state.operators.find(op => op.name === name);
  }

  /** Ask the kernel for a fresh snapshot (the answer arrives through `changed`). */
  refresh(): void {
    this._sendControl({ type: 'request_snapshot' });
  }

  /** The generated source of `kind` for operator `name`, fetched from the kernel. */
  requestSource(name: string, kind: SourceKind): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const key = sourceKey(name, kind);
      const timer = setTimeout(() => {
        this._settle(key, undefined, new Error(`the kernel did not send the ${kind} source of ${name}`));
      }, SOURCE_TIMEOUT_MS);
      const waiting = this._pending.get(key) ?? [];
      waiting.push({ resolve, reject, timer });
      this._pending.set(key, waiting);
      if (waiting.length === 1) {
        this._sendControl({ type: 'request_source', name, backend: kind });
      }
    });
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._rejectAll(new Error('the kernel connection was closed'));
    if (!this._kernel.isDisposed) {
      this._kernel.removeCommTarget(REGISTRY_TARGET, this._onRegistryOpen);
      this._kernel.connectionStatusChanged.disconnect(this._onConnectionStatus, this);
      this._kernel.statusChanged.disconnect(this._onStatus, this);
      this._control?.close();
    }
    this._control = null;
    Signal.clearData(this);
  }

  /** On (re)connection: attach to registry comms the kernel already has, then ask for a snapshot. */
  private async _start(): Promise<void> {
    this.refresh();
    try {
      const reply = await this._kernel.requestCommInfo({ target_name: REGISTRY_TARGET });
      if (this._isDisposed || reply.content.status !== 'ok') {
        return;
      }
      for (const [id, info] of Object.entries(reply.content.comms)) {
        if (info.target_name === REGISTRY_TARGET && !this._kernel.hasComm(id)) {
          this._watchRegistry(this._kernel.createComm(REGISTRY_TARGET, id));
        }
      }
    } catch (error) {
      console.warn('xbench: could not list the kernel comms', error);
    }
  }

  private _onConnectionStatus(_: unknown, status: Kernel.ConnectionStatus): void {
    if (status === 'connected') {
      this._dispatch({ kind: 'kernel', present: true });
      void this._start();
    }
  }

  private _onStatus(_: unknown, status: KM.Status): void {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      this._control = null;
      this._rejectAll(new Error(`the kernel is ${status}`));
      this._dispatch({ kind: 'kernel', present: status !== 'dead' });
    }
  }

  private _onRegistryOpen(comm: CommLike, msg: KM.ICommOpenMsg): void {
    this._watchRegistry(comm);
    this._receive(msg.content.data);
  }

  private _watchRegistry(comm: CommLike): void {
    comm.onMsg = msg => this._receive(msg.content.data);
  }

  private _sendControl(message: FrontendMessage): void {
    if (this._isDisposed) {
      return;
    }
    if (this._control && !this._control.isDisposed) {
      this._control.send(message as unknown as JSONObject);
      return;
    }
    const comm = this._kernel.createComm(CONTROL_TARGET);
    comm.onMsg = msg => this._receive(msg.content.data);
    comm.onClose = () => {
      if (this._control === comm) {
        this._control = null;
      }
      this._rejectAll(new Error('xbench is not loaded in this kernel (run %load_ext xbench)'));
      this._dispatch({ kind: 'control-closed' });
    };
    this._control = comm;
    // The kernel treats the data of comm_open as the first request.
    comm.open(message as unknown as JSONObject);
  }

  private _receive(data: unknown): void {
    let message: KernelMessage;
    try {
      message = parseKernelMessage(data);
    } catch (error) {
      if (error instanceof ProtocolError) {
        console.warn(`xbench: ignored a malformed message from the kernel: ${error.message}`, data);
        return;
      }
      throw error;
    }
    if (message.type === 'source') {
      this._settle(sourceKey(message.name, message.backend), message.text);
    } else if (message.type === 'error') {
      const error = new Error(message.message);
      if (message.name !== null && message.backend !== null) {
        this._settle(sourceKey(message.name, message.backend), undefined, error);
      } else {
        console.warn(`xbench: the kernel reported: ${message.message}`);
      }
    }
    this._dispatch({ kind: 'message', message });
  }

  private _settle(key: string, text?: string, error?: Error): void {
    const waiting = this._pending.get(key);
    if (!waiting) {
      return;
    }
    this._pending.delete(key);
    for (const { resolve, reject, timer } of waiting) {
      clearTimeout(timer);
      if (error || text === undefined) {
        reject(error ?? new Error('no source'));
      } else {
        resolve(text);
      }
    }
  }

  private _rejectAll(error: Error): void {
    for (const key of Array.from(this._pending.keys())) {
      this._settle(key, undefined, error);
    }
  }

  private _dispatch(action: Action): void {
    const next = reduce(this._state, action);
    if (next !== this._state) {
      this._state = next;
      this._changed.emit(next);
    }
  }

  private _kernel: KernelLike;
  private _control: CommLike | null = null;
  private _state: RegistryState = INITIAL_STATE;
  private _pending = new Map<string, Pending[]>();
  private _changed = new Signal<this, RegistryState>(this);
  private _isDisposed = false;
}

function sourceKey(name: string, kind: string): string {
  return `${name}\u0000${kind}`;
}
