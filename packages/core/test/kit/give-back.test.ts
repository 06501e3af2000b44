import { Idempotency, MemoryIdempotencyStore, NonRetryableError, StoreUnavailableError } from '../../src';
import { StoreGate } from '../../src/kit';
import { giveBackUnrun, writtenClaimOf } from '../../src/kit/give-back';
import { FaultyStore } from '../support/faulty-store';

const id = { scope: 'give-back', key: 'k' };
const down = () => new StoreUnavailableError('Redis did not answer');
const fast = { storeProbeBackoff: { baseMs: 2, maxMs: 10, jitter: 'none' as const } };

/** A counted claim on `k`, a gate on the same store, and a promise of each answered release. */
async function setup(storeFailureMode: 'closed' | 'open' = 'closed') {
  const store = new FaultyStore(new MemoryIdempotencyStore());
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 10_000, storeFailureMode });
  const claim = await idempotency.claim(id);
  const gate = new StoreGate(store, fast);
  const errors: unknown[] = [];
  const inner = store.release.bind(store);
  let answered!: (ok: boolean) => void;
  const released = new Promise<boolean>((resolve) => {
    answered = resolve;
  });
  jest.spyOn(store, 'release').mockImplementation(async (...args) => {
    const reply = await inner(...args);
    answered(reply.ok);
    return reply;
  });
  return { store, idempotency, claim, gate, errors, released, onStoreError: (e: unknown) => errors.push(e) };
}

/** `promise`'s value, or `'timeout'` when it has not settled within `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  return Promise.race([promise, new Promise<'timeout'>((r) => setTimeout(r, ms, 'timeout').unref())]);
}

describe('kit: giveBackUnrun', () => {
  it('gives back a counted claim at once: RELEASED, its attempt returned, the next claim ACQUIRED', async () => {
    const { idempotency, claim, gate } = await setup();
    await giveBackUnrun(idempotency, id, claim, { gate });
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
    expect(await idempotency.claim(id)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
  });

  it('a give-back the store does not answer closes the gate and is made again once a ping answers', async () => {
    const { store, idempotency, claim, gate, errors, released, onStoreError } = await setup();
    store.inject('release', { kind: 'throw', error: down }).inject('ping', { kind: 'throw', error: down }, 2);
    await giveBackUnrun(idempotency, id, claim, { gate, onStoreError });
    // Resolved after the first try; the gate is closed and the next try waits for a ping to answer.
    expect(errors).toEqual([expect.any(StoreUnavailableError)]);
    expect(gate.closed).toBe(true);
    expect(await within(released, 5_000)).toBe(true);
    expect(store.calls.ping).toBe(3);
    expect(store.calls.release).toBe(2);
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
    expect(await idempotency.claim(id)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
  });

  it('while the gate is closed: resolves at once without a try, and gives back once it opens', async () => {
    const { store, idempotency, claim, gate, released } = await setup();
    store.inject('ping', { kind: 'throw', error: down }, 2);
    gate.close(down());
    await giveBackUnrun(idempotency, id, claim, { gate });
    expect(store.calls.release).toBe(0);
    expect(await within(released, 5_000)).toBe(true);
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
  });

  it('a reply lost after Redis applied the give-back: the next try is refused by the fence, and nothing more is tried', async () => {
    const { store, idempotency, claim, gate, released } = await setup();
    store.inject('release', { kind: 'applyThenThrow', error: down });
    await giveBackUnrun(idempotency, id, claim, { gate });
    // The second try is answered LEASE_LOST: the record is RELEASED already.
    expect(await within(released, 5_000)).toBe(false);
    expect(store.calls.release).toBe(2);
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
  });

  it('an error that is not an outage is reported and not retried; the gate stays open', async () => {
    const { store, idempotency, claim, gate, errors, onStoreError } = await setup();
    store.inject('release', { kind: 'throw', error: () => new NonRetryableError('refused') });
    await giveBackUnrun(idempotency, id, claim, { gate, onStoreError });
    expect(errors).toEqual([expect.any(NonRetryableError)]);
    expect(gate.closed).toBe(false);
    expect(store.calls.release).toBe(1);
  });

  it('a runner that fails open does not close the gate for it: one try', async () => {
    const { store, idempotency, claim, gate, errors, onStoreError } = await setup('open');
    store.inject('release', { kind: 'throw', error: down });
    await giveBackUnrun(idempotency, id, claim, { gate, onStoreError });
    expect(errors).toHaveLength(1);
    expect(gate.closed).toBe(false);
    expect(store.calls.release).toBe(1);
  });

  it('stops trying when the signal aborts (the consumer stops), even once the store answers again', async () => {
    const { store, idempotency, claim, gate } = await setup();
    store
      .inject('release', { kind: 'throw', error: down })
      .inject('ping', { kind: 'throw', error: down }, 1000);
    const stopping = new AbortController();
    await giveBackUnrun(idempotency, id, claim, { gate, signal: stopping.signal });
    stopping.abort();
    store.heal();
    await gate.waitUntilOpen(); // woken after any waiter the give-back still had
    await new Promise((r) => setImmediate(r));
    expect(store.calls.release).toBe(1);
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'IN_PROGRESS', attempt: 1 });
  });

  it('stops trying when the gate is disposed while the store is down', async () => {
    const { store, idempotency, claim, gate } = await setup();
    store
      .inject('release', { kind: 'throw', error: down })
      .inject('ping', { kind: 'throw', error: down }, 1000);
    await giveBackUnrun(idempotency, id, claim, { gate });
    gate.dispose();
    store.heal();
    await new Promise((r) => setImmediate(r));
    expect(gate.closed).toBe(true); // a disposed gate does not probe, so nothing can wake a retry
    expect(await gate.waitUntilOpen()).toBe(false);
    expect(store.calls.release).toBe(1);
  });

  it('gives back a written claim whose outcome the store did not say (StoreUnavailableError.writtenClaim) as stale: RELEASED abandoned, no attempt spent, the next claim ACQUIRED_STALE', async () => {
    const { idempotency, claim, gate } = await setup();
    const { writtenClaim } = new StoreUnavailableError('Redis is unavailable', {
      writtenClaim: { fencingToken: claim.fencingToken },
    });
    await giveBackUnrun(idempotency, id, writtenClaim, { gate });
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0, abandoned: true });
    expect(await idempotency.claim(id)).toMatchObject({ outcome: 'ACQUIRED_STALE', attempt: 1 });
  });

  it('writtenClaimOf: the writtenClaim of a StoreUnavailableError, else undefined', () => {
    const written = { fencingToken: 7, outcome: 'ACQUIRED' as const };
    const error = new StoreUnavailableError('down', { writtenClaim: written });
    expect(writtenClaimOf(error)).toBe(error.writtenClaim);
    expect(writtenClaimOf(error)).toEqual({ kind: 'written-claim', ...written });
    expect(writtenClaimOf(new StoreUnavailableError('down'))).toBeUndefined();
    expect(writtenClaimOf(new NonRetryableError('no'))).toBeUndefined();
    expect(writtenClaimOf({ writtenClaim: written })).toBeUndefined();
    expect(writtenClaimOf(undefined)).toBeUndefined();
  });

  it('ignores a reply that is not a claim, and works without a gate (one try)', async () => {
    const { store, idempotency, claim, errors, onStoreError } = await setup();
    await giveBackUnrun(idempotency, id, undefined);
    const conflict = await idempotency.claim(id);
    expect(conflict.outcome).toBe('CONFLICT');
    await giveBackUnrun(idempotency, id, conflict);
    expect(store.calls.release).toBe(0);
    store.inject('release', { kind: 'throw', error: down });
    await giveBackUnrun(idempotency, id, claim, { onStoreError });
    expect(errors).toHaveLength(1);
    expect(store.calls.release).toBe(1);
  });
});
