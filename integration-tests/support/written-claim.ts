import {
  type ClaimOptions,
  type ClaimReply,
  type IdempotencyStore,
  type RecordId,
  StoreUnavailableError,
} from '@idempotent-consumer/core';

/**
 * Makes the next `call` of `store` (`claim`, or `waitForOutcome`) fail the way `RedisIdempotencyStore` with
 * `waitForReplicas` does when the `WAIT` (or the `start`) after a claim it applied goes unanswered: runs
 * `before`, applies the claim (with the call's options), calls `written`, then rejects with a
 * `StoreUnavailableError` naming it (`writtenClaim`). A reply that took no key (CONFLICT, DUPLICATE, …)
 * is returned as it is. Later calls go to the store unchanged.
 * @param store - any store whose `claim` applies claims (a `MemoryIdempotencyStore` in unit tests).
 * @param hooks.before - awaited first (e.g. another worker gives the key up as a CONFLICT wait begins).
 * @param hooks.written - called once the claim is applied (e.g. the store goes down from then on).
 */
export function nextClaimWrittenThenUnanswered(
  store: IdempotencyStore,
  call: 'claim' | 'waitForOutcome' = 'claim',
  { before, written }: { before?: () => Promise<unknown>; written?: () => void } = {},
): void {
  const claim = store.claim.bind(store);
  // Both methods take (id, options) first; the wait's third argument is not needed to claim.
  const target = store as unknown as Record<
    typeof call,
    (id: RecordId, options: ClaimOptions) => Promise<ClaimReply>
  >;
  const original = target[call];
  target[call] = async (id, options) => {
    target[call] = original;
    await before?.();
    const reply = await claim(id, options);
    if (reply.outcome !== 'ACQUIRED' && reply.outcome !== 'ACQUIRED_STALE') return reply;
    written?.();
    throw new StoreUnavailableError('Connection is closed.', {
      writtenClaim: { fencingToken: reply.fencingToken, outcome: reply.outcome },
    });
  };
}
