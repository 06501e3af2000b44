import type { UnprotectedResult } from '@idempotent-consumer/core';
import type { KafkaHandler, KafkaHandlerContext } from './handler';

/**
 * Runs the handler without a claim (`outcome: 'UNPROTECTED'`, fencing token 0): for a message without a
 * key under `missingKey: 'process'`, or when the store does not answer under `storeFailureMode: 'open'`.
 * Never rejects: the handler's error comes back as a `threw` result, for `decide` to bound its retries.
 * @param key - the message's key, `undefined` when it has none.
 * @param attempt - which run of this message this is in this process, 1 for the first.
 * @param storeError - the store's error when running fail-open, else `undefined`.
 */
export async function runUnprotected<T>(
  handler: KafkaHandler<T>,
  place: Pick<KafkaHandlerContext, 'scope' | 'key' | 'topic' | 'partition' | 'message' | 'heartbeat'>,
  attempt: number,
  storeError: unknown,
): Promise<UnprotectedResult<T>> {
  try {
    const result = await handler({
      ...place,
      fencingToken: 0,
      attempt,
      outcome: 'UNPROTECTED',
      signal: new AbortController().signal,
    });
    return { outcome: 'UNPROTECTED', status: 'completed', result, storeError };
  } catch (error) {
    return { outcome: 'UNPROTECTED', status: 'threw', error, storeError };
  }
}
