/**
 * The sidebar's state for one kernel, and the pure function that folds kernel messages into it.
 */
import { KernelMessage, OperatorRecord } from './protocol';

/**
 * - `no-kernel`: the notebook has no running kernel.
 * - `waiting`: a kernel is there; we asked it for a snapshot and have no answer yet.
 * - `not-loaded`: the kernel refused the control comm: xbench is not loaded in it.
 * - `ready`: the kernel answered; `operators` is its registry.
 */
export type Connection = 'no-kernel' | 'waiting' | 'not-loaded' | 'ready';

export interface RegistryState {
  readonly connection: Connection;
  readonly operators: readonly OperatorRecord[];
}

export type Action =
  | { kind: 'message'; message: KernelMessage }
  | { kind: 'kernel'; present: boolean }
  | { kind: 'control-closed' };

export const INITIAL_STATE: RegistryState = { connection: 'no-kernel', operators: [] };

export function reduce(state: RegistryState, action: Action): RegistryState {
  switch (action.kind) {
    case 'kernel':
      return { connection: action.present ? 'waiting' : 'no-kernel', operators: [] };
    case 'control-closed':
      return state.connection === 'ready' ? state : { ...state, connection: 'not-loaded' };
    case 'message':
      return applyMessage(state, action.message);
  }
}

function applyMessage(state: RegistryState, message: KernelMessage): RegistryState {
  switch (message.type) {
    case 'snapshot':
      return { connection: 'ready', operators: message.operators };
    case 'update': {
      const operators = state.operators.slice();
      const at = operators.findIndex(op => op.name === message.operator.name);
      if (at >= 0) {
        operators[at] = message.operator;
      } else {
        operators.push(message.operator);
      }
      return { connection: 'ready', operators };
    }
    case 'remove':
      return {
        connection: 'ready',
        operators: state.operators.filter(op => op.name !== message.name)
      };
    default:
      // Answers to source requests go to whoever asked; they do not change the registry.
      return state;
  }
}

/** What the sidebar says when it has no operators to list. */
export function emptyText(state: RegistryState): string | null {
  if (state.operators.length > 0) {
    return null;
  }
  switch (state.connection) {
    case 'no-kernel':
      return 'No kernel: open a notebook and start its kernel.';
    case 'waiting':
      return 'Waiting for the kernel…';
    case 'not-loaded':
      return 'This kernel has not loaded xbench yet. Run %load_ext xbench in a cell.';
    case 'ready':
      return 'No operators compiled yet. Write a %%tensorop cell and run it.';
  }
}
