/**
 * The messages exchanged with the kernel-side registry (`xbench.notebook.comm`).
 *
 * Kernel -> frontend, on comms of target `xbench.registry` (opened by the kernel):
 *   {type: "snapshot", operators: OperatorRecord[]}   (also the data of the comm_open)
 *   {type: "update", operator: OperatorRecord}
 *   {type: "remove", name: string}
 * Frontend -> kernel, on a comm of target `xbench.control` (opened by the frontend):
 *   {type: "request_snapshot"}                         -> {type: "snapshot", ...} on the same comm
 *   {type: "request_source", name, backend}            -> {type: "source", name, backend, text}
 *                                                        or {type: "error", name, backend, message}
 * Records travel without their source text; `source_kinds` lists the sources the kernel holds.
 */

export const REGISTRY_TARGET = 'xbench.registry';
export const CONTROL_TARGET = 'xbench.control';

export type Status = 'pass' | 'fail' | 'error';

/** The source kinds a record may carry, in the order their tabs are shown. */
export const SOURCE_KINDS = ['cpu', 'cuda', 'ptx', 'ascend'] as const;
export type SourceKind = (typeof SOURCE_KINDS)[number];

export const SOURCE_LABELS: Record<SourceKind, string> = {
  cpu: 'CPU',
  cuda: 'CUDA',
  ptx: 'PTX',
  ascend: 'Ascend C'
};

/** The MIME type JupyterLab's language registry uses to pick the highlighter. */
export const SOURCE_MIME_TYPES: Record<SourceKind, string> = {
  cpu: 'text/x-python',
  cuda: 'text/x-python',
  ptx: 'text/plain',
  ascend: 'text/x-c++src'
};

export interface BackendResult {
  status: Status;
  time_ms: number | null;
  max_abs_error: number | null;
  message: string | null;
  registers_per_thread: number | null;
  ub_bytes: number | null;
  /** The time is predicted (for `target`), not measured: it is never ranked against measured times. */
  predicted: boolean;
  target: string | null;
}

export interface OperatorRecord {
  name: string;
  signature: string;
  dims: Record<string, number>;
  backends: Record<string, BackendResult>;
  best: { backend: string; time_ms: number } | null;
  source_kinds: SourceKind[];
  updated: string;
}

export type KernelMessage =
  | { type: 'snapshot'; operators: OperatorRecord[] }
  | { type: 'update'; operator: OperatorRecord }
  | { type: 'remove'; name: string }
  | { type: 'source'; name: string; backend: SourceKind; text: string }
  | { type: 'error'; name: string | null; backend: string | null; message: string };

export type FrontendMessage =
  | { type: 'request_snapshot' }
  | { type: 'request_source'; name: string; backend: SourceKind };

export class ProtocolError extends Error {}

type Json = unknown;

function isObject(value: Json): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function nullableNumber(value: Json, where: string): number | null {
  if (value === null || value === undefined) {
    return null;
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new ProtocolError(`${where} must be a finite number or null`);
  }
  return value;
}

function nullableString(value: Json, where: string): string | null {
  if (value === null || value === undefined) {
    return null;
  }
  if (typeof value !== 'string') {
    throw new ProtocolError(`${where} must be a string or null`);
  }
  return value;
}

function requireString(value: Json, where: string): string {
  if (typeof value !== 'string') {
    throw new ProtocolError(`${where} must be a string`);
  }
  return value;
}

export function isSourceKind(value: Json): value is SourceKind {
  return (SOURCE_KINDS as readonly string[]).includes(value as string);
}

function parseBackend(value: Json, where: string): BackendResult {
  if (!isObject(value)) {
    throw new ProtocolError(`${where} must be an object`);
  }
  const status = value.status;
  if (status !== 'pass' && status !== 'fail' && status !== 'error') {
    throw new ProtocolError(`${where}.status must be "pass", "fail" or "error"`);
  }
  return {
    status,
    time_ms: nullableNumber(value.time_ms, `${where}.time_ms`),
    max_abs_error: nullableNumber(value.max_abs_error, `${where}.max_abs_error`),
    message: nullableString(value.message, `${where}.message`),
    registers_per_thread: nullableNumber(value.registers_per_thread, `${where}.registers_per_thread`),
    ub_bytes: nullableNumber(value.ub_bytes, `${where}.ub_bytes`),
    predicted: value.predicted === true,
    target: nullableString(value.target, `${where}.target`)
  };
}

/** Check an operator record as it arrives from the kernel. */
export function parseRecord(value: Json): OperatorRecord {
  if (!isObject(value)) {
    throw new ProtocolError('operator must be an object');
  }
  const name = requireString(value.name, 'operator.name');
  const where = `operator ${JSON.stringify(name)}`;
  const dims: Record<string, number> = {};
  if (value.dims !== undefined && value.dims !== null) {
    if (!isObject(value.dims)) {
      throw new ProtocolError(`${where}: dims must be an object`);
    }
    for (const [dim, size] of Object.entries(value.dims)) {
      if (typeof size !== 'number') {
        throw new ProtocolError(`${where}: dims.${dim} must be a number`);
      }
      dims[dim] = size;
    }
  }
  if (!isObject(value.backends)) {
    throw new ProtocolError(`${where}: backends must be an object`);
  }
  const backends: Record<string, BackendResult> = {};
  for (const [backend, result] of Object.entries(value.backends)) {
    backends[backend] = parseBackend(result, `${where}: backends.${backend}`);
  }
  let best: OperatorRecord['best'] = null;
  if (value.best !== null && value.best !== undefined) {
    if (!isObject(value.best)) {
      throw new ProtocolError(`${where}: best must be an object or null`);
    }
    const time = nullableNumber(value.best.time_ms, `${where}: best.time_ms`);
    if (time === null) {
      throw new ProtocolError(`${where}: best.time_ms must be a number`);
    }
    best = { backend: requireString(value.best.backend, `${where}: best.backend`), time_ms: time };
  }
  const kinds = Array.isArray(value.source_kinds) ? value.source_kinds : [];
  return {
    name,
    signature: requireString(value.signature, `${where}: signature`),
    dims,
    backends,
    best,
    source_kinds: SOURCE_KINDS.filter(kind => kinds.includes(kind)),
    updated: typeof value.updated === 'string' ? value.updated : ''
  };
}

/** Check a message received from the kernel; throws ProtocolError on anything malformed. */
export function parseKernelMessage(value: Json): KernelMessage {
  if (!isObject(value)) {
    throw new ProtocolError('message must be an object');
  }
  switch (value.type) {
    case 'snapshot':
      if (!Array.isArray(value.operators)) {
        throw new ProtocolError('snapshot.operators must be a list');
      }
      return { type: 'snapshot', operators: value.operators.map(parseRecord) };
    case 'update':
      return { type: 'update', operator: parseRecord(value.operator) };
    case 'remove':
      return { type: 'remove', name: requireString(value.name, 'remove.name') };
    case 'source': {
      const backend = value.backend;
      if (!isSourceKind(backend)) {
        throw new ProtocolError(`source.backend must be one of ${SOURCE_KINDS.join(', ')}`);
      }
      return {
        type: 'source',
        name: requireString(value.name, 'source.name'),
        backend,
        text: requireString(value.text, 'source.text')
      };
    }
    case 'error':
      return {
        type: 'error',
        name: nullableString(value.name, 'error.name'),
        backend: nullableString(value.backend, 'error.backend'),
        message: requireString(value.message, 'error.message')
      };
    default:
      throw new ProtocolError(`unknown message type ${JSON.stringify(value.type)}`);
  }
}
