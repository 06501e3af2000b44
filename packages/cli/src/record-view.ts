import type { IdempotencyRecord, RecordId, RecordState } from '@idempotent-consumer/core';
import { decodeResult } from '@idempotent-consumer/core/tools';

/** One record as the CLI shows it, with the same fields in tables and in `--json`. */
export interface RecordView {
  readonly scope: string;
  readonly key: string;
  readonly state: RecordState;
  readonly fencingToken: number;
  readonly attempt: number;
  /** IN_PROGRESS only. Claimed by a batch that has not started the handler yet, so no attempt counted. */
  readonly reserved: boolean;
  /** FAILED only: an adapter has dead-lettered the message already. */
  readonly deadLettered: boolean;
  /**
   * FAILED only. FAILED because the last attempt's lease lapsed, the store record's `lapsed` field `l`. Its
   * holder may still be running, and may still complete the record.
   */
  readonly lapsed: boolean;
  /**
   * The last handler may be partial or still running, so the next claim is `ACQUIRED_STALE`. Set on a
   * RELEASED record released abandoned, after a handler timeout or the CLI's `release` of a started
   * IN_PROGRESS record. Set on an IN_PROGRESS reservation that took over from a handler whose lease lapsed.
   * On a FAILED record, which exhausted its attempts after such a release or whose last handler timed out,
   * `release` makes the claim after it `ACQUIRED_STALE`.
   */
  readonly abandoned: boolean;
  /**
   * IN_PROGRESS only. Lease expiry minus the Redis server's clock, in ms. 0 or negative once the lease
   * lapsed, and the next claim then takes the record over as ACQUIRED_STALE. `null` in other states.
   */
  readonly leaseRemainingMs: number | null;
  /** IN_PROGRESS only. When the lease ends, ISO 8601 on the server clock. */
  readonly leaseExpiresAt: string | null;
  /**
   * First claim, ISO 8601 on the server clock. `null` when the record does not keep it, because a COMPLETED
   * record keeps only what duplicates need, see lua/complete.lua.
   */
  readonly createdAt: string | null;
  /** Last change, ISO 8601 on the server clock. */
  readonly updatedAt: string;
  /** Milliseconds until Redis forgets the record, its key TTL. -1 when it has none. */
  readonly ttlMs: number;
  /** SHA-256 hex of the first payload, '' when none was given. */
  readonly fingerprint: string;
  /** COMPLETED with a result. The decoded result as JSON, cut at the preview length. */
  readonly resultPreview: string | null;
  /** FAILED. The recorded error, cut at the preview length. */
  readonly errorPreview: string | null;
}

/**
 * The markers of a record's state, the `true` fields of {@link RecordView}, each with the name the tables
 * show and what it means. `inspect` shows a row per marker set, and `list` their names in one column with
 * {@link flagsOf}. `--json` has the fields themselves.
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

/** The stored result decoded by core's `decodeResult`, as JSON text, or raw if it cannot be decoded. */
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
