import { InvalidKeyError } from './errors';

/** Prefix of every record key when none is configured (`RedisIdempotencyStore`'s `keyPrefix`). */
export const DEFAULT_KEY_PREFIX = 'idem';

/** Longest idempotency key accepted, in UTF-8 bytes, unless the store is configured otherwise. */
export const DEFAULT_MAX_KEY_BYTES = 512;

/**
 * Identifies one record: an idempotency key inside its scope (consumer group + topic, queue, or HTTP
 * method + route; docs/design.md#vocabulary).
 */
export interface RecordId {
  /** Namespace of the key. Non-empty string. */
  readonly scope: string;
  /** The caller's identifier of one logical operation. Non-empty string. */
  readonly key: string;
}

/**
 * Builds the Redis key of a record. This is the only function that does (docs/design.md#record-keys).
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
  const scopePrefix = buildScopeKeyPrefix(prefix, id?.scope, maxKeyBytes);
  assertKeyPart('idempotency key', id?.key, maxKeyBytes);
  return `${scopePrefix}${id.key}`;
}

/**
 * The part every record key of one scope starts with: `<prefix>:<byte length of scope>:<scope>:`. Because
 * the scope's length is in it, no other scope's keys start with it.
 * @throws {@link InvalidKeyError} as {@link buildRecordKey} does for the prefix and scope.
 */
function buildScopeKeyPrefix(prefix: string, scope: string, maxKeyBytes: number): string {
  assertKeyPart('prefix', prefix, maxKeyBytes);
  const scopeBytes = assertKeyPart('scope', scope, maxKeyBytes);
  return `${prefix}:${scopeBytes}:${scope}:`;
}

/**
 * The `SCAN … MATCH` pattern of every record of one scope (for operators' tools: listing, counting,
 * purging a scope), with the glob characters of the prefix and scope (`* ? [ ] \`) escaped, so it matches
 * exactly the keys {@link buildRecordKey} builds for this prefix and scope. Use it with SCAN, never KEYS.
 *
 * @throws {@link InvalidKeyError} as {@link buildRecordKey} does for the prefix and scope.
 */
export function buildScopeScanPattern(
  prefix: string,
  scope: string,
  maxKeyBytes = DEFAULT_MAX_KEY_BYTES,
): string {
  return `${buildScopeKeyPrefix(prefix, scope, maxKeyBytes).replace(/[*?[\]\\]/g, '\\$&')}*`;
}

/**
 * The record id of a Redis key that {@link buildRecordKey} built for this prefix and scope (a key SCAN
 * returned), or `undefined` when the key belongs to another prefix or scope.
 *
 * @throws {@link InvalidKeyError} as {@link buildRecordKey} does for the prefix and scope.
 */
export function parseRecordKey(
  prefix: string,
  scope: string,
  redisKey: string,
  maxKeyBytes = DEFAULT_MAX_KEY_BYTES,
): RecordId | undefined {
  const scopePrefix = buildScopeKeyPrefix(prefix, scope, maxKeyBytes);
  if (!redisKey.startsWith(scopePrefix) || redisKey.length === scopePrefix.length) return undefined;
  return { scope, key: redisKey.slice(scopePrefix.length) };
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
