import type { Handler, UnprotectedResult } from '@idempotent-consumer/core';

/**
 * Runs a handler without idempotency for a message that has no key (`missingKey: 'process'`): outcome
 * `UNPROTECTED`, fencing token and attempt 0, `key` `''`, a signal that never aborts, the runner's result
 * shape. (A message whose claim met a store that does not answer, with `storeFailureMode: 'open'`, runs
 * unprotected through `Idempotency.run` instead, which emits the runner's `failOpen` event.)
 */
export async function runWithoutKey<T>(scope: string, handler: Handler<T>): Promise<UnprotectedResult<T>> {
  const context = {
    scope,
    key: '',
    fencingToken: 0,
    attempt: 0,
    outcome: 'UNPROTECTED' as const,
    signal: new AbortController().signal,
  };
  try {
    return {
      outcome: 'UNPROTECTED',
      status: 'completed',
      result: await handler(context),
      storeError: undefined,
    };
  } catch (error) {
    return { outcome: 'UNPROTECTED', status: 'threw', error, storeError: undefined };
  }
}
