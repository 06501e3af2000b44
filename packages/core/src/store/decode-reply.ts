import { UnexpectedReplyError } from '../errors';
import type {
  ClaimReply,
  ExtendReply,
  LeaseLostReply,
  MarkDeadLetteredReply,
  RecordState,
  StartReply,
  WriteReply,
} from './idempotency-store';

/**
 * The one place where raw script replies become typed replies, see docs/design.md#the-lua-contract. Every
 * function rejects a shape it does not know with {@link UnexpectedReplyError}, so version skew between the
 * scripts and this code never passes silently.
 */

const STATES: Record<string, RecordState> = { P: 'IN_PROGRESS', C: 'COMPLETED', R: 'RELEASED', F: 'FAILED' };

/** Maps a stored one-letter state to its name. @throws {@link UnexpectedReplyError} for an unknown letter. */
export function decodeState(letter: unknown): RecordState {
  const state = typeof letter === 'string' ? STATES[letter] : undefined;
  if (!state) throw new UnexpectedReplyError(`Unknown record state ${JSON.stringify(letter)}`);
  return state;
}

function fail(script: string, reply: unknown): never {
  throw new UnexpectedReplyError(`Unexpected reply from the ${script} script: ${safeJson(reply)}`);
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value).slice(0, 200);
  } catch {
    return String(value);
  }
}

function int(script: string, reply: unknown, value: unknown): number {
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'string' && /^-?\d+$/.test(value)
        ? Number(value)
        : NaN;
  if (!Number.isSafeInteger(n)) fail(script, reply);
  return n;
}

function str(script: string, reply: unknown, value: unknown): string {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  return fail(script, reply);
}

function flag(script: string, reply: unknown, value: unknown): boolean {
  const n = int(script, reply, value);
  if (n !== 0 && n !== 1) fail(script, reply);
  return n === 1;
}

function asArray(script: string, reply: unknown, length: number): unknown[] {
  if (!Array.isArray(reply) || reply.length !== length) fail(script, reply);
  return reply;
}

/** Decodes a reply of `lua/claim.lua`. */
export function decodeClaimReply(reply: unknown): ClaimReply {
  const s = 'claim';
  const head = Array.isArray(reply) ? reply[0] : undefined;
  switch (head) {
    case 'ACQUIRED':
    case 'ACQUIRED_STALE': {
      const r = asArray(s, reply, 6);
      return {
        outcome: head,
        fencingToken: int(s, reply, r[1]),
        attempt: int(s, reply, r[2]),
        leaseExpiresAtMs: int(s, reply, r[3]),
        serverTimeMs: int(s, reply, r[4]),
        started: flag(s, reply, r[5]),
      };
    }
    case 'DUPLICATE': {
      const r = asArray(s, reply, 6);
      return {
        outcome: 'DUPLICATE',
        fencingToken: int(s, reply, r[1]),
        attempt: int(s, reply, r[2]),
        result: flag(s, reply, r[3]) ? str(s, reply, r[4]) : undefined,
        completedAtMs: int(s, reply, r[5]),
      };
    }
    case 'CONFLICT': {
      const r = asArray(s, reply, 4);
      return {
        outcome: 'CONFLICT',
        fencingToken: int(s, reply, r[1]),
        attempt: int(s, reply, r[2]),
        remainingLeaseMs: int(s, reply, r[3]),
      };
    }
    case 'PAYLOAD_MISMATCH': {
      const r = asArray(s, reply, 4);
      return {
        outcome: 'PAYLOAD_MISMATCH',
        fencingToken: int(s, reply, r[1]),
        attempt: int(s, reply, r[2]),
        state: decodeState(r[3]),
      };
    }
    case 'FAILED': {
      const r = asArray(s, reply, 5);
      return {
        outcome: 'FAILED',
        fencingToken: int(s, reply, r[1]),
        attempt: int(s, reply, r[2]),
        error: str(s, reply, r[3]),
        deadLettered: flag(s, reply, r[4]),
      };
    }
    default:
      return fail(s, reply);
  }
}

function decodeLeaseLost(script: string, reply: unknown): LeaseLostReply {
  const r = asArray(script, reply, 3);
  const letter = str(script, reply, r[2]);
  return {
    ok: false,
    reason: 'LEASE_LOST',
    currentFencingToken: int(script, reply, r[1]),
    state: letter === '' ? null : decodeState(letter),
  };
}

/** Decodes a reply of `lua/complete.lua`, `lua/release.lua`, `lua/fail.lua` or `lua/give-back.lua`. */
export function decodeWriteReply(
  script: 'complete' | 'release' | 'fail' | 'give-back',
  reply: unknown,
): WriteReply {
  const head = Array.isArray(reply) ? reply[0] : undefined;
  if (head === 'OK') {
    const r = asArray(script, reply, 2);
    return { ok: true, serverTimeMs: int(script, reply, r[1]) };
  }
  if (head === 'LEASE_LOST') return decodeLeaseLost(script, reply);
  return fail(script, reply);
}

/** Decodes a reply of `lua/extend.lua`. */
export function decodeExtendReply(reply: unknown): ExtendReply {
  const head = Array.isArray(reply) ? reply[0] : undefined;
  if (head === 'OK') {
    const r = asArray('extend', reply, 3);
    return {
      ok: true,
      leaseExpiresAtMs: int('extend', reply, r[1]),
      serverTimeMs: int('extend', reply, r[2]),
    };
  }
  if (head === 'LEASE_LOST') return decodeLeaseLost('extend', reply);
  return fail('extend', reply);
}

/** Decodes a reply of `lua/start.lua`. */
export function decodeStartReply(reply: unknown): StartReply {
  const head = Array.isArray(reply) ? reply[0] : undefined;
  if (head === 'OK') {
    const r = asArray('start', reply, 4);
    return {
      ok: true,
      attempt: int('start', reply, r[1]),
      leaseExpiresAtMs: int('start', reply, r[2]),
      serverTimeMs: int('start', reply, r[3]),
    };
  }
  if (head === 'LEASE_LOST') return decodeLeaseLost('start', reply);
  return fail('start', reply);
}

/** Decodes a reply of `lua/mark-dead-lettered.lua`. */
export function decodeMarkDeadLetteredReply(reply: unknown): MarkDeadLetteredReply {
  const head = Array.isArray(reply) ? reply[0] : undefined;
  if (head === 'OK') {
    const r = asArray('mark-dead-lettered', reply, 2);
    return { ok: true, first: flag('mark-dead-lettered', reply, r[1]) };
  }
  if (head === 'LEASE_LOST') return decodeLeaseLost('mark-dead-lettered', reply);
  return fail('mark-dead-lettered', reply);
}
