import { createHash } from 'node:crypto';
import { types } from 'node:util';
import canonicalize from 'canonicalize';
import { InvalidPayloadError } from './errors';

/**
 * What a fingerprint is computed from. Raw message bytes in a `Buffer`, a `Uint8Array` or a `string` taken as
 * UTF-8, or a JSON value serialized canonically by RFC 8785, the JSON Canonicalization Scheme, so that key
 * order and number formatting do not change the fingerprint.
 */
export type Payload = Uint8Array | string | JsonValue;

/** A JSON value, as accepted by {@link fingerprint}. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A fingerprint as stored, the SHA-256 as 64 hex characters. */
const FINGERPRINT = /^[0-9a-f]{64}$/;

/**
 * SHA-256 of a payload as 64 lowercase hex characters. The record stores it at claim, and a later claim of
 * the same key with another fingerprint returns `PAYLOAD_MISMATCH`, see docs/design.md#fingerprints.
 *
 * A JSON value must be what JSON can carry. Refused, because JSON would drop or change them silently, are
 * `bigint`, functions, symbols, `NaN`, `Infinity` and cycles, and objects JSON writes as `{}` whatever they
 * hold, such as `Map`, `Set`, `WeakMap`, `WeakSet`, `ArrayBuffer`, `DataView` and `Promise`. An object with a
 * `toJSON` goes through it. Anything whose getter or `toJSON` throws is refused too. Raw bytes go in a
 * `Uint8Array` or `Buffer`. Properties whose value is `undefined` are left out, as `JSON.stringify` does.
 *
 * @throws {@link InvalidPayloadError} when the payload cannot be fingerprinted. The cause says why.
 */
export function fingerprint(payload: Payload): string {
  const hash = createHash('sha256');
  try {
    if (typeof payload === 'string') hash.update(payload, 'utf8');
    else if (payload instanceof Uint8Array) hash.update(payload);
    else {
      checkJson(payload, '$', []);
      const json = canonicalize(payload);
      if (json === undefined)
        throw new InvalidPayloadError('The payload cannot be serialized as canonical JSON');
      hash.update(json, 'utf8');
    }
  } catch (cause) {
    if (cause instanceof InvalidPayloadError) throw cause;
    throw new InvalidPayloadError(`The payload cannot be fingerprinted: ${describeCause(cause)}`, { cause });
  }
  return hash.digest('hex');
}

/**
 * Checks a precomputed fingerprint of 64 hex characters in either case, and returns it in lowercase.
 * @throws {@link InvalidPayloadError} otherwise. The message shows at most its first 20 characters.
 */
export function checkFingerprint(value: unknown): string {
  const lower = typeof value === 'string' ? value.toLowerCase() : undefined;
  if (lower === undefined || !FINGERPRINT.test(lower)) {
    const shown =
      typeof value === 'string'
        ? `${JSON.stringify(value.slice(0, 20))} (${value.length} characters)`
        : typeof value;
    throw new InvalidPayloadError(`fingerprint must be 64 hex characters (SHA-256), got ${shown}`);
  }
  return lower;
}

/** Walks a JSON value after `toJSON`, refusing what JSON would drop or change. */
function checkJson(value: unknown, path: string, ancestors: object[]): void {
  const bad = (what: string): never => {
    throw new InvalidPayloadError(`The payload cannot be fingerprinted: ${what} at ${path}`);
  };
  if (typeof value === 'bigint') bad('a bigint');
  if (typeof value === 'function') bad('a function');
  if (typeof value === 'symbol') bad('a symbol');
  if (typeof value === 'number' && !Number.isFinite(value)) bad(String(value));
  if (typeof value !== 'object' || value === null) return;
  if (ancestors.includes(value)) bad('a circular reference');
  const inner = [...ancestors, value];
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    checkJson(toJSON.call(value), path, inner);
    return;
  }
  const opaque = opaqueKind(value);
  if (opaque !== undefined) bad(opaque);
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) checkJson(v, `${path}[${i}]`, inner);
  } else {
    for (const [k, v] of Object.entries(value)) if (v !== undefined) checkJson(v, `${path}.${k}`, inner);
  }
}

/**
 * What JSON turns into `{}` whatever it holds, such as a Map, a Set, a Promise or raw bytes not in a
 * `Uint8Array`. Two different payloads of that kind would share one fingerprint, so a PAYLOAD_MISMATCH would
 * pass as a DUPLICATE. `undefined` for anything else. Recognised across realms by `util.types`.
 */
function opaqueKind(value: object): string | undefined {
  if (types.isMap(value)) return 'a Map';
  if (types.isSet(value)) return 'a Set';
  if (types.isWeakMap(value) || types.isWeakSet(value)) return 'a WeakMap or WeakSet';
  if (types.isAnyArrayBuffer(value)) return 'an ArrayBuffer (pass a Uint8Array over it)';
  if (types.isDataView(value)) return 'a DataView (pass a Uint8Array over its buffer)';
  if (types.isPromise(value)) return 'a Promise';
  return undefined;
}

function describeCause(cause: unknown): string {
  try {
    return cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
  } catch {
    return 'an unprintable error';
  }
}
