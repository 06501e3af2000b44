import { isIdempotencyError, type UnreadableResultError } from '../errors';
import type { DuplicateResult } from '../runner/run-result';
import type { AdapterLog } from './adapter-log';

/**
 * The DUPLICATE an {@link UnreadableResultError} stands for, as the run result a consumer settles, or
 * `undefined` for any other error. `Idempotency.run` and `settle` reject with that error when the key's
 * record is COMPLETED but its stored result cannot be decoded (a newer version's encoding met during a
 * rolling upgrade, or corrupt bytes); a consumer never needs the result, so it acks, resolves the offset
 * or deletes the message like any DUPLICATE instead of giving it back forever. The result has
 * `result: undefined` and `hasResult: false` (nothing readable to replay); its fencing token, attempt and
 * completion time are the error's `duplicate`. Recognises the error of any installed copy of the core (its
 * brand and `code` `UNREADABLE_RESULT`, not `instanceof`); a `duplicate` that is not three numbers is
 * taken as 0s. The adapters report the error itself too (a `storeError` event), so an operator sees the
 * version skew; given the consumer's `log`, the first one is logged as a warning (`warnOnce`, topic
 * `unreadable-result`).
 *
 * @param log - the consumer's log, for that one warning; none when omitted.
 *
 * @example
 * ```ts
 * let result: RunResult<T>;
 * try { result = await idempotency.run(request, handler); }
 * catch (error) {
 *   const duplicate = unreadableDuplicateOf(error);
 *   if (!duplicate) throw error;
 *   reportStoreError(error);
 *   result = duplicate;
 * }
 * ```
 */
export function unreadableDuplicateOf(error: unknown, log?: AdapterLog): DuplicateResult<never> | undefined {
  if (!isIdempotencyError(error) || error.code !== 'UNREADABLE_RESULT') return undefined;
  log?.warnOnce(
    'unreadable-result',
    `${log.where}: ${error.message}. The message is settled as a duplicate (the operation completed); upgrade this consumer if a newer version wrote the result. Further ones are reported only by the storeError event.`,
    { error },
  );
  const facts = (error as { readonly duplicate?: unknown }).duplicate;
  const read = (name: 'fencingToken' | 'attempt' | 'completedAtMs'): number => {
    const value = typeof facts === 'object' && facts !== null ? (facts as Record<string, unknown>)[name] : 0;
    return typeof value === 'number' && Number.isFinite(value) ? value : 0;
  };
  return {
    outcome: 'DUPLICATE',
    result: undefined,
    hasResult: false,
    fencingToken: read('fencingToken'),
    attempt: read('attempt'),
    completedAtMs: read('completedAtMs'),
  };
}
