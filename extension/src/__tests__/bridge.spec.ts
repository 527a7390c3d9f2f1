import { Signal } from '@lumino/signaling';

import { KernelBridge, KernelLike, SOURCE_TIMEOUT_MS } from '../bridge';
import { CONTROL_TARGET, REGISTRY_TARGET } from '../protocol';
import { RegistryState } from '../store';
import { softmaxWire } from './fixtures';

/** A comm that records what the frontend sends; the test plays the kernel. */
class FakeComm {
  constructor(
    readonly targetName: string,
    readonly commId: string
  ) {}
  opened: unknown[] = [];
  sent: unknown[] = [];
  closed = false;
  isDisposed = false;
  onMsg: (msg: any) => void = () => undefined;
  onClose: (msg: any) => void = () => undefined;
  open(data: unknown) {
    this.opened.push(data);
  }
  send(data: unknown) {
    this.sent.push(data);
  }
  close() {
    this.closed = true;
  }
  /** The kernel sends a comm_msg. */
  receive(data: unknown) {
    this.onMsg({ content: { comm_id: this.commId, data } });
  }
  /** The kernel closes the comm (as it does when the target is not registered). */
  closeFromKernel() {
    this.isDisposed = true;
    this.onClose({ content: { comm_id: this.commId, data: {} } });
  }
}

class FakeKernel {
  targets = new Map<string, (comm: any, msg: any) => void>();
  comms: FakeComm[] = [];
  existing: Record<string, { target_name: string }> = {};
  connectionStatus: string = 'connected';
  connectionStatusChanged = new Signal<this, string>(this);
  statusChanged = new Signal<this, string>(this);
  isDisposed = false;
  private next = 0;

  registerCommTarget(name: string, callback: (comm: any, msg: any) => void) {
    this.targets.set(name, callback);
  }
  removeCommTarget(name: string) {
    this.targets.delete(name);
  }
  createComm(target: string, id?: string) {
    const comm = new FakeComm(target, id ?? `comm-${this.next++}`);
    this.comms.push(comm);
    return comm;
  }
  hasComm(id: string) {
    return this.comms.some(comm => comm.commId === id);
  }
  async requestCommInfo(content: { target_name: string }) {
    const comms: Record<string, { target_name: string }> = {};
    for (const [id, info] of Object.entries(this.existing)) {
      if (info.target_name === content.target_name) {
        comms[id] = info;
      }
    }
    return { content: { status: 'ok', comms } };
  }
  controls(): FakeComm[] {
    return this.comms.filter(comm => comm.targetName === CONTROL_TARGET);
  }
  /** The kernel opens a comm on a frontend target. */
  openFromKernel(target: string, data: unknown): FakeComm {
    const comm = new FakeComm(target, `kernel-${this.next++}`);
    this.targets.get(target)!(comm, { content: { comm_id: comm.commId, target_name: target, data } });
    return comm;
  }
}

const bridges: KernelBridge[] = [];

function bridgeFor(kernel: FakeKernel): KernelBridge {
  const bridge = new KernelBridge(kernel as unknown as KernelLike);
  bridges.push(bridge);
  return bridge;
}

afterEach(() => {
  bridges.splice(0).forEach(bridge => bridge.dispose());
});

function make(): { kernel: FakeKernel; bridge: KernelBridge; states: RegistryState[] } {
  const kernel = new FakeKernel();
  const bridge = bridgeFor(kernel);
  const states: RegistryState[] = [];
  bridge.changed.connect((_, state) => states.push(state));
  return { kernel, bridge, states };
}

const flush = () => new Promise(resolve => setTimeout(resolve, 0));

describe('KernelBridge', () => {
  it('registers the registry target and asks for a snapshot on the control comm', () => {
    const { kernel, bridge } = make();
    expect(kernel.targets.has(REGISTRY_TARGET)).toBe(true);
    expect(kernel.controls()).toHaveLength(1);
    expect(kernel.controls()[0].opened).toEqual([{ type: 'request_snapshot' }]);
    expect(bridge.state.connection).toBe('waiting');
  });

  it('lists the operators from the snapshot reply', () => {
    const { kernel, bridge, states } = make();
    kernel.controls()[0].receive({ type: 'snapshot', operators: [softmaxWire()] });
    expect(bridge.state.connection).toBe('ready');
    expect(bridge.operator('softmax')?.backends.cuda.registers_per_thread).toBe(32);
    expect(states.map(s => s.connection)).toEqual(['ready']);
  });

  it('reports a kernel without xbench, then picks the registry up when xbench loads', () => {
    const { kernel, bridge } = make();
    kernel.controls()[0].closeFromKernel();
    expect(bridge.state.connection).toBe('not-loaded');
    const registry = kernel.openFromKernel(REGISTRY_TARGET, { type: 'snapshot', operators: [] });
    expect(bridge.state).toEqual({ connection: 'ready', operators: [] });
    registry.receive({ type: 'update', operator: softmaxWire() });
    expect(bridge.state.operators.map(op => op.name)).toEqual(['softmax']);
    registry.receive({ type: 'remove', name: 'softmax' });
    expect(bridge.state.operators).toEqual([]);
  });

  it('fetches a source on demand and answers every caller that asked for it', async () => {
    const { kernel, bridge } = make();
    const control = kernel.controls()[0];
    const first = bridge.requestSource('softmax', 'ascend');
    const second = bridge.requestSource('softmax', 'ascend');
    expect(control.sent).toEqual([{ type: 'request_source', name: 'softmax', backend: 'ascend' }]);
    control.receive({ type: 'source', name: 'softmax', backend: 'ascend', text: 'class KernelSoftmax {};' });
    await expect(first).resolves.toBe('class KernelSoftmax {};');
    await expect(second).resolves.toBe('class KernelSoftmax {};');
  });

  it('rejects a source request the kernel cannot answer', async () => {
    const { kernel, bridge } = make();
    const asked = bridge.requestSource('gelu', 'ptx');
    kernel.controls()[0].receive({ type: 'error', name: 'gelu', backend: 'ptx', message: 'no operator named gelu' });
    await expect(asked).rejects.toThrow('no operator named gelu');
  });

  it('re-opens the control comm for a request after the kernel closed it', () => {
    const { kernel, bridge } = make();
    kernel.controls()[0].closeFromKernel();
    void bridge.requestSource('softmax', 'cpu').catch(() => undefined);
    expect(kernel.controls()).toHaveLength(2);
    expect(kernel.controls()[1].opened).toEqual([{ type: 'request_source', name: 'softmax', backend: 'cpu' }]);
  });

  it('attaches to registry comms the kernel opened before this page loaded', async () => {
    const kernel = new FakeKernel();
    kernel.existing = { 'old-registry': { target_name: REGISTRY_TARGET } };
    const bridge = bridgeFor(kernel);
    await flush();
    const attached = kernel.comms.find(comm => comm.commId === 'old-registry');
    expect(attached?.targetName).toBe(REGISTRY_TARGET);
    expect(attached?.opened).toEqual([]);
    attached!.receive({ type: 'update', operator: softmaxWire() });
    expect(bridge.operator('softmax')?.name).toBe('softmax');
  });

  it('forgets the registry and fails pending requests when the kernel restarts', async () => {
    const { kernel, bridge } = make();
    kernel.controls()[0].receive({ type: 'snapshot', operators: [softmaxWire()] });
    const asked = bridge.requestSource('softmax', 'cuda');
    kernel.statusChanged.emit('restarting');
    await expect(asked).rejects.toThrow('the kernel is restarting');
    expect(bridge.state).toEqual({ connection: 'waiting', operators: [] });
    kernel.connectionStatusChanged.emit('connected');
    expect(kernel.controls()).toHaveLength(2);
    expect(kernel.controls()[1].opened).toEqual([{ type: 'request_snapshot' }]);
  });

  it('waits for the connection before asking', () => {
    const kernel = new FakeKernel();
    kernel.connectionStatus = 'connecting';
    bridgeFor(kernel);
    expect(kernel.controls()).toHaveLength(0);
    kernel.connectionStatusChanged.emit('connected');
    expect(kernel.controls()).toHaveLength(1);
  });

  it('gives up on a source the kernel never sends', async () => {
    jest.useFakeTimers();
    try {
      const { bridge } = make();
      const asked = bridge.requestSource('softmax', 'ptx');
      jest.advanceTimersByTime(SOURCE_TIMEOUT_MS - 1);
      let settled = false;
      asked.catch(() => undefined).finally(() => (settled = true));
      await Promise.resolve();
      expect(settled).toBe(false);
      jest.advanceTimersByTime(1);
      await expect(asked).rejects.toThrow('the kernel did not send the ptx source of softmax');
    } finally {
      jest.useRealTimers();
    }
  });

  it('closes its control comm and stops listening when disposed', () => {
    const { kernel, bridge } = make();
    bridge.dispose();
    expect(kernel.controls()[0].closed).toBe(true);
    expect(kernel.targets.has(REGISTRY_TARGET)).toBe(false);
  });

  it('ignores malformed messages', () => {
    const { kernel, bridge } = make();
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    kernel.controls()[0].receive({ type: 'snapshot', operators: 'all' });
    expect(bridge.state.connection).toBe('waiting');
    expect(warn).toHaveBeenCalledWith(
      expect.stringContaining('snapshot.operators must be a list'),
      expect.anything()
    );
    warn.mockRestore();
  });
});
