import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { UnexpectedReplyError, UnreadableResultError } from '../errors';
import type { DuplicateReply } from '../store/idempotency-store';

/** How handler results are stored, see docs/design.md#the-record-and-its-states. */
export interface ResultOptions {
  /**
   * Largest stored result, in bytes after encoding and compression. @defaultValue 65536
   */
  maxResultBytes?: number;
  /**
   * What happens to a larger result. `omit` completes the record without a result and emits `resultOmitted`,
   * so duplicates are still skipped but replay `undefined`. `fail` records the operation FAILED with a
   * `ResultTooLargeError`, and duplicates never run again either. Never a silent truncation.
   * @defaultValue `'omit'`
   */
  onResultTooLarge?: 'omit' | 'fail';
  /**
   * Results whose JSON is longer than this many bytes are stored deflated. `Infinity` turns compression off.
   * @defaultValue 1024
   */
  compressAboveBytes?: number;
}

/** An encoded result, or why there is none. */
export type EncodedResult =
  | { readonly kind: 'none' }
  | { readonly kind: 'stored'; readonly value: string }
  | { readonly kind: 'too-large'; readonly bytes: number };

/** No result, as one frozen object, since most handlers of a consumer return nothing. */
const NONE: EncodedResult = Object.freeze({ kind: 'none' });

/**
 * Encodes a handler's return value for the record. `undefined` stores nothing. Anything else is JSON prefixed
 * `j`, or above `compressAboveBytes` base64 of raw deflate prefixed `z`.
 * @throws TypeError when the value cannot be serialized as JSON, such as a `bigint` or a cycle.
 */
export function encodeResult(value: unknown, options: Required<ResultOptions>): EncodedResult {
  if (value === undefined) return NONE;
  const json = JSON.stringify(value);
  if (json === undefined) return NONE; // functions and symbols serialize to nothing
  let encoded = `j${json}`;
  // A UTF-16 code unit is at most 3 UTF-8 bytes, so short strings skip Buffer.byteLength, which showed
  // in the per-message CPU profile. The limits themselves are unchanged.
  if (json.length * 3 > options.compressAboveBytes && Buffer.byteLength(json) > options.compressAboveBytes) {
    const z = `z${deflateRawSync(json).toString('base64')}`;
    // Compare bytes, which the store keeps and maxResultBytes counts, not UTF-16 lengths. base64 is ASCII.
    if (z.length < Buffer.byteLength(encoded)) encoded = z;
  }
  if (encoded.length * 3 > options.maxResultBytes) {
    const bytes = Buffer.byteLength(encoded);
    if (bytes > options.maxResultBytes) return { kind: 'too-large', bytes };
  }
  return { kind: 'stored', value: encoded };
}

/**
 * Decodes a stored result written by {@link encodeResult}.
 * @throws {@link UnexpectedReplyError} when the stored value has an unknown prefix or is corrupt.
 */
export function decodeResult<T>(stored: string | undefined): T | undefined {
  if (stored === undefined) return undefined;
  try {
    if (stored.startsWith('j')) return JSON.parse(stored.slice(1)) as T;
    if (stored.startsWith('z'))
      return JSON.parse(inflateRawSync(Buffer.from(stored.slice(1), 'base64')).toString()) as T;
  } catch (cause) {
    throw new UnexpectedReplyError('A stored result could not be decoded', { cause });
  }
  throw new UnexpectedReplyError(
    `A stored result has an unknown encoding ${JSON.stringify(stored.slice(0, 1))}`,
  );
}

/**
 * Decodes the stored result of a DUPLICATE claim reply with {@link decodeResult}.
 * @throws {@link UnreadableResultError} when the stored value has an unknown prefix or is corrupt. It names
 *   the DUPLICATE's fencing token, attempt and completion time, with the codec's `UnexpectedReplyError` as
 *   its `cause`.
 */
export function decodeDuplicateResult<T>(reply: DuplicateReply): T | undefined {
  try {
    return decodeResult<T>(reply.result);
  } catch (cause) {
    const { fencingToken, attempt, completedAtMs } = reply;
    throw new UnreadableResultError(
      `The key completed (DUPLICATE, fencing token ${fencingToken}), but its stored result cannot be decoded by this version (${(cause as Error).message}): a newer version's encoding, or corrupt bytes`,
      { cause, duplicate: { fencingToken, attempt, completedAtMs } },
    );
  }
}
