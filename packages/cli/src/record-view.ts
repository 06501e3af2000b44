import type { IdempotencyRecord, RecordId, RecordState } from '@idempotent-consumer/core';
import { decodeResult } from '@idempotent-consumer/core/kit';

/** One record as the CLI shows it, in tables and in `--json` (the same fields). */
export interface RecordView {
  readonly scope: string;
  readonly key: string;
  readonly state: RecordState;
  readonly fencingToken: number;
  readonly attempt: number;
  /** IN_PROGRESS only: claimed by a batch that has not started the handler yet (no attempt counted). */
  readonly reserved: boolean;
  /** FAILED only: an adapter has dead-lettered the message already. */
  readonly deadLettered: boolean;
  /**
   * FAILED only: FAILED because the last attempt's lease lapsed (the store record's `lapsed`, `l`): its
   * holder may still be running, and may still complete the record.
   */
  readonly lapsed: boolean;
  /**
   * RELEASED (or IN_PROGRESS under a reservation) after a handler that may be partial or still running: it
   * was released abandoned (a handler timeout, or the CLI's `release` of a started IN_PROGRESS record), or
   * the reservation took over from a handler whose lease lapsed. The next claim is `ACQUIRED_STALE`. On a
   * FAILED record (it exhausted its attempts after such a release, or its last attempt's handler timed out),
   * `release` makes the claim after it `ACQUIRED_STALE`.
   */
  readonly abandoned: boolean;
  /**
   * IN_PROGRESS only: lease expiry minus the Redis server's clock, in ms; 0 or negative when the lease
   * lapsed (the next claim takes the record over as ACQUIRED_STALE). `null` in other states.
   */
  readonly leaseRemainingMs: number | null;
  /** IN_PROGRESS only: when the lease ends, ISO 8601 on the server clock. */
  readonly leaseExpiresAt: string | null;
  /**
   * First claim, ISO 8601 on the server clock; `null` when the record does not keep it (a COMPLETED record
   * keeps only what duplicates need: lua/complete.lua).
   */
  readonly createdAt: string | null;
  /** Last change, ISO 8601 on the server clock. */
  readonly updatedAt: string;
  /** Milliseconds until Redis forgets the record (its key TTL); -1 when it has none. */
  readonly ttlMs: number;
  /** SHA-256 hex of the first payload, '' when none was given. */
  readonly fingerprint: string;
  /** COMPLETED with a result: the decoded result as JSON, cut at the preview length. */
  readonly resultPreview: string | null;
  /** FAILED: the recorded error, cut at the preview length. */
  readonly errorPreview: string | null;
}

/**
 * The markers of a record's state beside it (`true` fields of {@link RecordView}), each with the name the
 * tables show and what it means: `inspect` shows a row per marker set, `list` their names in one column
 * ({@link flagsOf}); `--json` has the fields themselves.
 */
export const RECORD_FLAGS = [
  {
    field: 'reserved',
    name: 'reserved',
    meaning: 'claimed by a batch, handler not started (no attempt counted)',
  },
  {
    field: 'deadLettered',
    name: 'dead-lettered',
    meaning: 'an adapter has sent the message to its dead-letter destination',
  },
  {
    field: 'abandoned',
    name: 'abandoned',
    meaning:
      'the last handler may be partial or still running; the next claim is ACQUIRED_STALE (FAILED: the one after a release)',
  },
  {
    field: 'lapsed',
    name: 'lapsed',
    meaning: "FAILED because the last attempt's lease lapsed; its handler may still run and complete it",
  },
] as const satisfies readonly { field: keyof RecordView; name: string; meaning: string }[];

/** The names of the {@link RECORD_FLAGS} set on `view`, in their order. */
export function flagsOf(view: RecordView): string[] {
  return RECORD_FLAGS.filter((flag) => view[flag.field]).map((flag) => flag.name);
}

/** Builds the view of a record read with the store's `get`, at the server time `serverTimeMs`. */
export function recordView(
  id: RecordId,
  record: IdempotencyRecord,
  serverTimeMs: number,
  previewChars: number,
): RecordView {
  const lease = record.state === 'IN_PROGRESS' ? record.leaseExpiresAtMs : undefined;
  return {
    scope: id.scope,
    key: id.key,
    state: record.state,
    fencingToken: record.fencingToken,
    attempt: record.attempt,
    reserved: record.reserved,
    deadLettered: record.deadLettered,
    abandoned: record.abandoned,
    lapsed: record.lapsed,
    leaseRemainingMs: lease === undefined ? null : lease - serverTimeMs,
    leaseExpiresAt: lease === undefined ? null : iso(lease),
    createdAt: record.createdAtMs > 0 ? iso(record.createdAtMs) : null,
    updatedAt: iso(record.updatedAtMs),
    ttlMs: record.ttlMs,
    fingerprint: record.fingerprint,
    resultPreview: record.result === undefined ? null : cut(resultJson(record.result), previewChars),
    errorPreview: record.error === undefined ? null : cut(record.error, previewChars),
  };
}

/** The stored result decoded (core's `decodeResult`: JSON, deflated JSON) as JSON text; raw if it cannot be. */
function resultJson(encoded: string): string {
  try {
    return JSON.stringify(decodeResult(encoded)) ?? '';
  } catch {
    return encoded;
  }
}

function iso(ms: number): string {
  return Number.isFinite(ms) && ms > 0 ? new Date(ms).toISOString() : '';
}

/** `text` cut to `max` characters, with an ellipsis and the full length when it was longer. */
export function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} chars)`;
}
