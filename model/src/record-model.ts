/**
 * The model of one key's record and its scripts, as the oracle of the model-based tests: each method is
 * one atomic step and follows the inline of the same name in model/scripts.pml branch by branch (the
 * replay test runs both on the same sequences and compares them, model/test/replay.test.ts). Tokens are
 * numbered in the order they were issued (1, 2, ...): the real stores' tokens come from their clock, and
 * the tests map the n-th real token to n.
 */
import type { RecordState } from '@idempotent-consumer/core';

/** The record as the model keeps it (lua/claim.lua names the real fields). */
export interface ModelRecord {
  s: RecordState;
  t: number;
  a: number;
  /** The lease expiry e is after the server clock. */
  live: boolean;
  v: boolean;
  l: boolean;
  d: boolean;
  b: boolean;
  /** The stored result, undefined when none. */
  r: string | undefined;
  /** The stored error (FAILED). */
  x: string | undefined;
  /** The fingerprint, '' for none. */
  p: string;
}

/** A claim's reply, times left out. */
export type ModelClaimReply =
  | { outcome: 'ACQUIRED' | 'ACQUIRED_STALE'; fencingToken: number; attempt: number; started: boolean }
  | { outcome: 'DUPLICATE'; fencingToken: number; attempt: number; result: string | undefined }
  | { outcome: 'CONFLICT'; fencingToken: number; attempt: number }
  | { outcome: 'PAYLOAD_MISMATCH'; fencingToken: number; attempt: number; state: RecordState }
  | { outcome: 'FAILED'; fencingToken: number; attempt: number; error: string; deadLettered: boolean };

/** A fenced write's refusal (includes/fence.lua). */
export interface ModelLeaseLost {
  ok: false;
  reason: 'LEASE_LOST';
  currentFencingToken: number;
  state: RecordState | null;
}

export type ModelWriteReply = { ok: true } | ModelLeaseLost;
export type ModelStartReply = { ok: true; attempt: number } | ModelLeaseLost;
export type ModelMarkReply = { ok: true; first: boolean } | ModelLeaseLost;

/** admin-release.lua's reply. */
export type ModelAdminReleaseReply =
  | { outcome: 'OK'; previousState: RecordState; fencingToken: number }
  | { outcome: 'NOT_FOUND' }
  | { outcome: 'NOT_RELEASABLE' | 'TOKEN_CHANGED'; state: RecordState; fencingToken: number };

/** admin-purge.lua's reply. */
export type ModelPurgeReply =
  | { outcome: 'DELETED' | 'OTHER_STATE'; state: RecordState }
  | { outcome: 'NOT_FOUND' }
  | { outcome: 'LEASE_HELD'; fencingToken: number };

/** The record of one key and its scripts (model/scripts.pml). */
export class RecordModel {
  rec: ModelRecord | undefined;
  /** Tokens issued so far: the next claim's token is issued + 1, also after the record was lost. */
  issued = 0;

  /** claim.lua: fingerprint '' for none, maxAttempts 0 for unlimited. */
  claim(fingerprint: string, maxAttempts: number, reserve: boolean): ModelClaimReply {
    const rec = this.rec;
    if (rec && fingerprint !== '' && rec.p !== '' && rec.p !== fingerprint) {
      return { outcome: 'PAYLOAD_MISMATCH', fencingToken: rec.t, attempt: rec.a, state: rec.s };
    }
    if (rec?.s === 'COMPLETED') {
      return { outcome: 'DUPLICATE', fencingToken: rec.t, attempt: rec.a, result: rec.r };
    }
    if (rec?.s === 'FAILED') {
      return {
        outcome: 'FAILED',
        fencingToken: rec.t,
        attempt: rec.a,
        error: rec.x ?? '',
        deadLettered: rec.d,
      };
    }
    const ranBefore = rec?.s === 'IN_PROGRESS' && !rec.v;
    const abandoned = rec?.b === true;
    let outcome: 'ACQUIRED' | 'ACQUIRED_STALE' = abandoned ? 'ACQUIRED_STALE' : 'ACQUIRED';
    if (rec?.s === 'IN_PROGRESS') {
      if (rec.live) return { outcome: 'CONFLICT', fencingToken: rec.t, attempt: rec.a };
      if (ranBefore) outcome = 'ACQUIRED_STALE';
    }
    if (rec && maxAttempts > 0 && rec.a >= maxAttempts) {
      let error = `ATTEMPTS_EXHAUSTED: ${rec.a} of ${maxAttempts} attempts used`;
      if (ranBefore) {
        error += ', the last one lost its lease';
        rec.l = true;
      } else if (abandoned) {
        error += ', the last one recorded no outcome (abandoned by its handler timeout, or its lease lapsed)';
      }
      Object.assign(rec, { s: 'FAILED', x: error, live: false, v: false });
      return { outcome: 'FAILED', fencingToken: rec.t, attempt: rec.a, error, deadLettered: false };
    }
    this.issued += 1;
    const token = this.issued;
    const next: ModelRecord = rec ?? {
      s: 'IN_PROGRESS',
      t: 0,
      a: 0,
      live: false,
      v: false,
      l: false,
      d: false,
      b: false,
      r: undefined,
      x: undefined,
      p: '',
    };
    const attempt = next.a + 1;
    if (reserve) {
      next.v = true;
      if (ranBefore && !abandoned) next.b = true;
    } else {
      next.a += 1;
      next.v = false;
      next.b = false;
    }
    if (fingerprint !== '' && next.p === '') next.p = fingerprint;
    Object.assign(next, { s: 'IN_PROGRESS', t: token, live: true });
    this.rec = next;
    return { outcome, fencingToken: token, attempt, started: !reserve };
  }

  /** includes/fence.lua: the record, when it carries `token` in a state `allowed` accepts. */
  #fence(token: number, allowed: (rec: ModelRecord) => boolean): ModelRecord | ModelLeaseLost {
    const rec = this.rec;
    if (rec && rec.t === token && allowed(rec)) return rec;
    return { ok: false, reason: 'LEASE_LOST', currentFencingToken: rec?.t ?? 0, state: rec?.s ?? null };
  }

  /** complete.lua: result undefined for none. */
  complete(token: number, result: string | undefined): ModelWriteReply {
    const rec = this.#fence(token, (r) => r.s === 'IN_PROGRESS' || (r.s === 'FAILED' && r.l));
    if ('ok' in rec) return rec;
    Object.assign(rec, { s: 'COMPLETED', live: false, x: undefined, d: false, l: false, v: false, b: false });
    rec.r = result;
    return { ok: true };
  }

  /** release.lua. */
  release(token: number, abandoned: boolean, neverStarted: boolean): ModelWriteReply {
    const rec = this.#fence(token, (r) => r.s === 'IN_PROGRESS');
    if ('ok' in rec) return rec;
    if (neverStarted && !rec.v && rec.a > 0) rec.a -= 1;
    if (abandoned) rec.b = true;
    Object.assign(rec, { s: 'RELEASED', live: false, v: false });
    return { ok: true };
  }

  /** fail.lua. */
  fail(token: number, error: string, abandoned: boolean): ModelWriteReply {
    const rec = this.#fence(token, (r) => r.s === 'IN_PROGRESS');
    if ('ok' in rec) return rec;
    rec.x = error;
    if (abandoned) rec.b = true;
    Object.assign(rec, { s: 'FAILED', live: false, v: false });
    return { ok: true };
  }

  /** extend.lua. */
  extend(token: number): ModelWriteReply {
    const rec = this.#fence(token, (r) => r.s === 'IN_PROGRESS');
    if ('ok' in rec) return rec;
    rec.live = true;
    return { ok: true };
  }

  /** start.lua. */
  start(token: number): ModelStartReply {
    const rec = this.#fence(token, (r) => r.s === 'IN_PROGRESS');
    if ('ok' in rec) return rec;
    if (rec.v) rec.a += 1;
    Object.assign(rec, { v: false, b: false, live: true });
    return { ok: true, attempt: rec.a };
  }

  /** mark-dead-lettered.lua. */
  markDeadLettered(token: number): ModelMarkReply {
    const rec = this.#fence(token, (r) => r.s === 'FAILED');
    if ('ok' in rec) return rec;
    const first = !rec.d;
    rec.d = true;
    return { ok: true, first };
  }

  /** admin-release.lua: expectedToken 0 for any, expectedState undefined for any. */
  adminRelease(expectedToken: number, expectedState: RecordState | undefined): ModelAdminReleaseReply {
    const rec = this.rec;
    if (!rec) return { outcome: 'NOT_FOUND' };
    if (
      (expectedToken > 0 && rec.t !== expectedToken) ||
      (expectedState !== undefined && rec.s !== expectedState)
    ) {
      return { outcome: 'TOKEN_CHANGED', state: rec.s, fencingToken: rec.t };
    }
    if (rec.s !== 'IN_PROGRESS' && rec.s !== 'FAILED') {
      return { outcome: 'NOT_RELEASABLE', state: rec.s, fencingToken: rec.t };
    }
    const previousState = rec.s;
    if ((rec.s === 'IN_PROGRESS' && !rec.v) || (rec.s === 'FAILED' && (rec.l || rec.b))) rec.b = true;
    Object.assign(rec, { s: 'RELEASED', a: 0, live: false, x: undefined, v: false, l: false, d: false });
    return { outcome: 'OK', previousState, fencingToken: rec.t };
  }

  /** admin-purge.lua: states empty for any. */
  adminPurge(states: readonly RecordState[]): ModelPurgeReply {
    const rec = this.rec;
    if (!rec) return { outcome: 'NOT_FOUND' };
    if (states.length > 0 && !states.includes(rec.s)) return { outcome: 'OTHER_STATE', state: rec.s };
    if (rec.s === 'IN_PROGRESS' && rec.live) return { outcome: 'LEASE_HELD', fencingToken: rec.t };
    this.rec = undefined;
    return { outcome: 'DELETED', state: rec.s };
  }

  /** The server clock passes the lease. */
  lapse(): void {
    if (this.rec) this.rec.live = false;
  }

  /** The record is lost (DEL, expiry, a restart without persistence). */
  lose(): void {
    this.rec = undefined;
  }
}
