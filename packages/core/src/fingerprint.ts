import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/**
 * What a fingerprint is computed from: raw message bytes (`Buffer`, `Uint8Array`, `string` taken as UTF-8),
 * or a JSON value, serialized canonically (RFC 8785, JSON Canonicalization Scheme) so that key order and
 * number formatting do not change the fingerprint.
 */
export type Payload = Uint8Array | string | JsonValue;

/** A JSON value, as accepted by {@link fingerprint}. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * SHA-256 of a payload as 64 lowercase hex characters. The record stores it at claim; a later claim of the
 * same key with another fingerprint returns `PAYLOAD_MISMATCH` (DESIGN.md, "Fingerprint").
 *
 * @throws TypeError when a JSON value cannot be canonicalized (for example it contains `undefined` at the
 *   top level or a `bigint`).
 */
export function fingerprint(payload: Payload): string {
  const hash = createHash('sha256');
  if (payload instanceof Uint8Array) hash.update(payload);
  else if (typeof payload === 'string') hash.update(payload, 'utf8');
  else {
    const json = canonicalize(payload);
    if (json === undefined) throw new TypeError('The payload cannot be serialized as canonical JSON');
    hash.update(json, 'utf8');
  }
  return hash.digest('hex');
}
