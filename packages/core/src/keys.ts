import { InvalidKeyError } from './errors';

/** Longest idempotency key accepted, in UTF-8 bytes, unless the store is configured otherwise. */
export const DEFAULT_MAX_KEY_BYTES = 512;

/**
 * Identifies one record: an idempotency key inside its scope (consumer group + topic, queue, or HTTP
 * method + route; DESIGN.md, "Vocabulary").
 */
export interface RecordId {
  /** Namespace of the key. Non-empty string. */
  readonly scope: string;
  /** The caller's identifier of one logical operation. Non-empty string. */
  readonly key: string;
}

/**
 * Builds the Redis key of a record. This is the only function that does (DESIGN.md, "Layout").
 *
 * Shape: `<prefix>:<byte length of scope>:<scope>:<key>`. The scope's length makes the mapping injective:
 * two different (scope, key) pairs never produce the same Redis key, whatever characters they contain.
 *
 * @param prefix - namespace of every record of one application, for example `idem`. Non-empty.
 * @param id - the scope and idempotency key.
 * @param maxKeyBytes - longest accepted key, in UTF-8 bytes.
 * @throws {@link InvalidKeyError} when the prefix, scope or key is not a non-empty string, is not
 *   well-formed UTF-16 (a lone surrogate would be encoded as U+FFFD and collide), or is longer than
 *   `maxKeyBytes`.
 */
export function buildRecordKey(prefix: string, id: RecordId, maxKeyBytes = DEFAULT_MAX_KEY_BYTES): string {
  assertKeyPart('prefix', prefix, maxKeyBytes);
  const scopeBytes = assertKeyPart('scope', id?.scope, maxKeyBytes);
  assertKeyPart('idempotency key', id?.key, maxKeyBytes);
  return `${prefix}:${scopeBytes}:${id.scope}:${id.key}`;
}

/** A high surrogate not followed by a low one, or a low surrogate not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Checks one part of a record id and returns its length in UTF-8 bytes.
 * @throws {@link InvalidKeyError} when it is not a non-empty string of at most `maxBytes` bytes.
 */
function assertKeyPart(what: string, value: unknown, maxBytes: number): number {
  if (typeof value !== 'string') {
    throw new InvalidKeyError(`The ${what} must be a string, got ${value === null ? 'null' : typeof value}`);
  }
  if (value.length === 0) throw new InvalidKeyError(`The ${what} must not be empty`);
  // A lone UTF-16 surrogate is sent to Redis as U+FFFD, so two different strings would share one key.
  if (LONE_SURROGATE.test(value)) {
    throw new InvalidKeyError(`The ${what} is not well-formed UTF-16 (it contains a lone surrogate)`);
  }
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > maxBytes) {
    throw new InvalidKeyError(`The ${what} is ${bytes} bytes long; at most ${maxBytes} are accepted`);
  }
  return bytes;
}
