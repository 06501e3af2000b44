import {
  type IdempotencyError,
  InvalidKeyError,
  InvalidOptionError,
  InvalidPayloadError,
  isIdempotencyError,
  MissingKeyError,
} from '../errors';
import { fingerprint } from '../fingerprint';
import { describeError } from '../runner/idempotency';
import type { MessagePort, Prepared } from './port';

/**
 * Reads a message's scope, key and payload through its port. Never throws: a scope that cannot be read is
 * `unscoped`, a missing key `missing-key`, a key or payload that cannot be read `invalid-key`.
 */
export function prepare<M>(port: MessagePort<M, unknown>, message: M): Prepared {
  let scope: string;
  try {
    scope = port.scopeOf(message);
    if (typeof scope !== 'string' || scope === '') {
      throw new InvalidOptionError(`the scope of a message must be a non-empty string, got ${String(scope)}`);
    }
  } catch (error) {
    return { kind: 'unscoped', error };
  }
  const unkeyed = (reason: 'missing-key' | 'invalid-key', error: IdempotencyError): Prepared => ({
    kind: 'unkeyed',
    scope,
    reason,
    error,
  });
  let key: string | undefined;
  try {
    key = port.keyOf(message);
  } catch (error) {
    const text = `The idempotency key extractor threw: ${describeError(error)}`;
    return unkeyed('invalid-key', new InvalidKeyError(text, { cause: error }));
  }
  if (key === undefined || key === '') {
    return unkeyed('missing-key', new MissingKeyError('The message carries no idempotency key'));
  }
  try {
    const payload = port.payloadOf(message);
    return {
      kind: 'keyed',
      request: payload === undefined ? { scope, key } : { scope, key, fingerprint: fingerprint(payload) },
    };
  } catch (error) {
    if (isIdempotencyError(error)) return unkeyed('invalid-key', error as IdempotencyError);
    const text = `The payload could not be read: ${describeError(error)}`;
    return unkeyed('invalid-key', new InvalidPayloadError(text, { cause: error }));
  }
}
