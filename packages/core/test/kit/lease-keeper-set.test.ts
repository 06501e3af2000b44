import {
  type AcquiredReply,
  type ClaimReply,
  Idempotency,
  InvalidOptionError,
  MemoryIdempotencyStore,
  type RecordId,
  StoreUnavailableError,
} from '../../src';
import { LeaseKeeperSet, StoreGate } from '../../src/kit';
import { FaultyStore } from '../support/faulty-store';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ids: RecordId[] = [0, 1, 2].map((i) => ({ scope: 'batch', key: `m${i}` }));
const timings = { leaseMs: 150, retentionMs: 60_000, heartbeatIntervalMs: 40 };

function acquired(reply: ClaimReply | undefined): AcquiredReply {
  if (reply?.outcome !== 'ACQUIRED' && reply?.outcome !== 'ACQUIRED_STALE')
    throw new Error(`got ${reply?.outcome}`);
  return reply;
}

/** A batch of three reservations on one store, as a batch consumer makes them. */
async function setup() {
  const store = new FaultyStore(new MemoryIdempotencyStore());
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 150, retentionMs: 60_000 });
  const replies = await idempotency.claimMany(ids.map((id) => ({ ...id })));
  const set = new LeaseKeeperSet<number>(idempotency, timings);
  for (const [i, reply] of replies.entries()) set.add(i, ids[i]!, acquired(reply));
  return { store, idempotency, set, replies };
}

describe('kit: LeaseKeeperSet', () => {
  it('keeps every claim alive for several leases until it is taken; a rival meets CONFLICT meanwhile', async () => {
    // On a fake clock (the memory store's and the timers'): a busy machine that stalls the event loop
    // longer than a lease would lapse the claims between two beats on the real one.
    jest.useFakeTimers();
    const { idempotency, set } = await setup();
    const rival = new Idempotency({ store: idempotency.store, logger: false }, { leaseMs: 150 });
    set.start();
    await jest.advanceTimersByTimeAsync(400); // more than two leases
    for (const id of ids) expect((await rival.claim(id)).outcome).toBe('CONFLICT');
    jest.useRealTimers();
    const taken = await set.take(2);
    expect(taken).toBeDefined();
    expect(set.has(2)).toBe(false);
    const result = await idempotency.execute(ids[2]!, taken!.claim, () => 'ran', {
      renewedLease: taken!.renewedLease,
    });
    expect(result).toMatchObject({ status: 'completed', attempt: 1 });
    await set.releaseAll();
  });

  it('a heartbeat interval longer than a Node timer holds (2^31 ms) does not extend every millisecond', async () => {
    const { store, idempotency, set } = await setup();
    const long = new LeaseKeeperSet<number>(idempotency, { ...timings, heartbeatIntervalMs: 2 ** 31 });
    long.add(0, ids[0]!, (await set.take(0))!.claim);
    long.start();
    await sleep(30); // 1 ms timers created before this one fire first
    expect(store.calls.extend).toBe(0);
    await long.releaseAll();
    await set.releaseAll();
  });

  it('releaseAll gives back every claim not taken; a reservation given back costs no attempt', async () => {
    const { idempotency, set } = await setup();
    set.start();
    await set.take(0);
    await set.releaseAll();
    expect(set.size).toBe(0);
    const again = await idempotency.claim(ids[1]!);
    expect(again).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
    expect((await idempotency.claim(ids[0]!)).outcome).toBe('CONFLICT'); // taken: not released by the set
  });

  it('drops a claim whose extension the store refuses: take returns undefined and onLost reports it', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 150, retentionMs: 60_000 });
    const [reply] = await idempotency.claimMany([ids[0]!]);
    const lost: unknown[] = [];
    const set = new LeaseKeeperSet<string>(idempotency, timings, { onLost: (e) => lost.push(e) });
    set.add('a', ids[0]!, acquired(reply));
    // Another worker takes the key over after the lease lapses (the set has not started yet).
    await sleep(200);
    const rival = new Idempotency({ store, logger: false }, { leaseMs: 10_000 });
    expect((await rival.claim(ids[0]!)).outcome).toMatch(/^ACQUIRED/);
    set.start();
    while (lost.length === 0) await sleep(10);
    expect(lost).toEqual([{ id: ids[0], fencingToken: acquired(reply).fencingToken }]);
    await expect(set.take('a')).resolves.toBeUndefined();
    await set.releaseAll();
  });

  it('reports an extension the store does not answer and keeps the claim, trying again at the next beat', async () => {
    const { store, idempotency, set } = await setup();
    const errors: string[] = [];
    const reporting = new LeaseKeeperSet<number>(idempotency, timings, {
      onStoreError: (e) => errors.push(`${e.operation} ${e.id.key}`),
    });
    const reply = (await set.take(0))!.claim;
    reporting.add(0, ids[0]!, reply);
    store.inject('extend', { kind: 'throw', error: () => new StoreUnavailableError('down') }, 1);
    reporting.start();
    while (store.calls.extend < 2) await sleep(10);
    expect(errors).toEqual(['extend m0']);
    const taken = await reporting.take(0);
    expect(taken?.claim).toBe(reply);
    await set.releaseAll();
    await reporting.releaseAll();
  });

  it('take waits for a round of extensions in flight, and an added claim after releaseAll is released at once', async () => {
    const { store, idempotency, set } = await setup();
    store.inject(
      'extend',
      { kind: 'hangThenThrow', ms: 60, error: () => new StoreUnavailableError('slow') },
      3,
    );
    set.start();
    while (store.calls.extend === 0) await sleep(5);
    const before = store.calls.extend;
    await set.take(1);
    expect(store.calls.extend).toBeGreaterThanOrEqual(before);
    await set.releaseAll();
    const [late] = await idempotency.claimMany([{ scope: 'batch', key: 'late' }]);
    set.add(9, { scope: 'batch', key: 'late' }, acquired(late));
    expect(set.has(9)).toBe(false);
    while (store.calls.release < 3) await sleep(5); // two left over + the late one
    expect((await idempotency.claim({ scope: 'batch', key: 'late' })).outcome).toBe('ACQUIRED');
  });

  it('a release the store does not answer is reported, never thrown', async () => {
    const { store, idempotency, set } = await setup();
    const errors: string[] = [];
    const reporting = new LeaseKeeperSet<number>(idempotency, timings, {
      onStoreError: (e) => errors.push(`${e.operation} ${e.id.key}`),
    });
    for (const i of [0, 1, 2]) reporting.add(i, ids[i]!, (await set.take(i))!.claim);
    store.inject('release', { kind: 'throw', error: () => new StoreUnavailableError('down') }, 3);
    await expect(reporting.releaseAll()).resolves.toBeUndefined();
    expect(errors.sort()).toEqual(['release m0', 'release m1', 'release m2']);
  });

  it('a give-back the store does not answer is made again once the gate opens: RELEASED, no attempt spent', async () => {
    const store = new FaultyStore(new MemoryIdempotencyStore());
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 60_000, retentionMs: 60_000 });
    const gate = new StoreGate(store, { storeProbeBackoff: { baseMs: 2, maxMs: 10, jitter: 'none' } });
    const stopping = new AbortController();
    const errors: string[] = [];
    const set = new LeaseKeeperSet<number>(
      idempotency,
      timings,
      { onStoreError: (e) => errors.push(`${e.operation} ${e.id.key}`) },
      { gate, signal: stopping.signal },
    );
    const [reservation] = await idempotency.claimMany([ids[0]!]);
    set.add(0, ids[0]!, acquired(reservation));
    set.add(1, ids[1]!, acquired(await idempotency.claim(ids[1]!))); // a counted claim
    // Neither store call of the first tries is answered; the store answers again after them.
    store.inject('release', { kind: 'throw', error: () => new StoreUnavailableError('down') }, 2);
    await set.releaseAll();
    expect(errors.sort()).toEqual(['release m0', 'release m1']);
    expect(gate.closed).toBe(true); // storeFailureMode 'closed': the unanswered give-back closed it
    try {
      await gate.waitUntilOpen();
      while (store.calls.release < 4) await sleep(2);
      for (const id of [ids[0]!, ids[1]!]) {
        expect(await store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0, abandoned: false });
        expect(await idempotency.claim(id)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
      }
    } finally {
      stopping.abort();
      gate.dispose();
    }
  });

  it('without a gate a give-back is tried once; the retention of the extensions defaults to the runner', async () => {
    const store = new FaultyStore(new MemoryIdempotencyStore());
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 60_000, retentionMs: 5_000 });
    const extend = jest.spyOn(store, 'extend');
    const set = new LeaseKeeperSet<number>(idempotency, { leaseMs: 150, heartbeatIntervalMs: 5 });
    set.add(0, ids[0]!, acquired(await idempotency.claim(ids[0]!)));
    set.start();
    while (store.calls.extend === 0) await sleep(2);
    expect(extend.mock.calls[0]![2]).toEqual({ leaseMs: 150, retentionMs: 5_000 });
    store.inject('release', { kind: 'throw', error: () => new StoreUnavailableError('down') }, 1);
    await set.releaseAll(); // no gate: nothing is left to try later
    expect(store.calls.release).toBe(1);
    expect(await store.get(ids[0]!)).toMatchObject({ state: 'IN_PROGRESS' });
  });

  it('checks its timings when it is built', () => {
    const idempotency = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
    expect(() => new LeaseKeeperSet(idempotency, { ...timings, heartbeatIntervalMs: 0 })).toThrow(
      InvalidOptionError,
    );
    expect(() => new LeaseKeeperSet(idempotency, { ...timings, leaseMs: 1.5 })).toThrow(
      /^leaseMs must be an integer >= 1/,
    );
    expect(() => new LeaseKeeperSet(idempotency, { ...timings, leaseMs: 2 ** 52 + 1 })).toThrow(
      /^leaseMs must be at most 2\^52/,
    );
  });
});
