import type { HandlerContext, UnprotectedResult } from '@idempotent-consumer/core';

/**
 * Runs a handler without idempotency for a message that has no key (`missingKey: 'process'`): outcome
 * `UNPROTECTED`, fencing token 0, `key` `undefined`, `attempt` the message's receive count, a signal that never aborts, the runner's result
 * shape. (A message whose claim met a store that does not answer, with `storeFailureMode: 'open'`, runs
 * unprotected through `Idempotency.run` instead, which emits the runner's `failOpen` event.)
 */
export async function runWithoutKey<T>(
  scope: string,
  attempt: number,
  handler: (context: Omit<HandlerContext, 'key'> & { readonly key: string | undefined }) => Promise<T> | T,
): Promise<UnprotectedResult<T>> {
  const context = {
    scope,
    key: undefined,
    fencingToken: 0,
    attempt,
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
