import { performance } from 'node:perf_hooks';
import {
  type AcquiredReply,
  type ClaimReply,
  Idempotency,
  InvalidOptionError,
  LeaseLostError,
  MemoryIdempotencyStore,
  StoreUnavailableError,
} from '../src';
import { LeaseKeeperSet } from '../src/kit';
import { FaultyStore, recordEvents } from './support/faulty-store';

// A counted claim handed to `execute` close to the end of its lease (by the local clock, counted from when
// it was requested): any claim that waited, or one held in a LeaseKeeperSet while the set extended it in
// the store (`take` hands over the claim's own reply and the set's last confirmed extension, which
// `execute` counts from when it was sent). The runner's lease keeper gives its first beat half of
// what is left; when the store's answer takes longer than that, the local deadline passed first and the
// handler was aborted although the store still held the lease.
//
// Fake timers: the runner's local clock (`performance.now`) and the store's clock follow them, so "50 ms
// left" and "the extension answers after 200 ms" are exact.

const request = { scope: 'handover', key: 'k' };
const LEASE_MS = 3_000; // heartbeat interval: 1000 ms
const EXTEND_REPLY_MS = 200; // an extension's reply arrives this long after it was sent

/** A store whose `extend` answers `EXTEND_REPLY_MS` after it was applied (a slow network, a busy Redis). */
class SlowExtend extends FaultyStore {
  override async extend(...args: Parameters<FaultyStore['extend']>): ReturnType<FaultyStore['extend']> {
    const reply = await super.extend(...args);
    await new Promise((r) => setTimeout(r, EXTEND_REPLY_MS));
    return reply;
  }
}

function acquired(reply: ClaimReply | undefined): AcquiredReply {
  if (reply?.outcome !== 'ACQUIRED' && reply?.outcome !== 'ACQUIRED_STALE')
    throw new Error(`got ${reply?.outcome}`);
  return reply;
}

/** A handler that runs `ms` (fake time) unless its signal aborts first; says whether it aborted. */
function working(ms: number) {
  const seen: { aborted?: unknown } = {};
  const handler = ({ signal }: { signal: AbortSignal }) =>
    new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve('done'), ms);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        seen.aborted = signal.reason;
        resolve('aborted');
      });
    });
  return { handler, seen };
}

describe('a claim handed to execute close to the end of its local lease', () => {
  let offsetMs = 0; // how far the store's clock is ahead of the runner's (a takeover the runner cannot see)
  beforeEach(() => {
    offsetMs = 0;
    jest.useFakeTimers();
    jest.spyOn(performance, 'now').mockImplementation(() => Date.now());
  });
  afterEach(() => {
    jest.restoreAllMocks();
    jest.useRealTimers();
  });

  function setup() {
    const memory = new MemoryIdempotencyStore({ now: () => Date.now() + offsetMs });
    const store = new SlowExtend(memory);
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: LEASE_MS, retentionMs: 60_000 });
    return { memory, store, idempotency, events: recordEvents(idempotency) };
  }

  it('a counted claim a LeaseKeeperSet kept alive, taken 50 ms before its own lease end: no extension before the handler, completes', async () => {
    const { memory, store, idempotency, events } = setup();
    const t0 = performance.now();
    const [reply] = await idempotency.claimMany([request], { reserve: false });
    const claim = acquired(reply);
    expect(claim.started).toBe(true);
    const set = new LeaseKeeperSet<number>(idempotency, { leaseMs: LEASE_MS, heartbeatIntervalMs: 1_000 });
    set.add(0, request, claim);
    set.start();
    // Extensions sent at 1000 and 2200 ms (each answered 200 ms later, the next beat 1000 ms after that).
    await jest.advanceTimersByTimeAsync(LEASE_MS - 50);
    // The store holds the lease: a rival meets CONFLICT.
    expect((await memory.claim(request, { leaseMs: 1, retentionMs: 1 })).outcome).toBe('CONFLICT');
    const taken = await set.take(0);
    expect(taken?.claim).toBe(claim); // the claim's own reply: the runner knows when it was requested
    // The last extension, counted from when it was sent (2200 ms), not from its reply (2400 ms).
    expect(taken?.renewedLease).toEqual({
      sentAt: t0 + 2_200,
      leaseMs: LEASE_MS,
      fencingToken: claim.fencingToken,
    });
    const extendsAtTake = store.calls.extend;
    let extendsBeforeHandler = -1;
    const { handler, seen } = working(1_500);
    const running = idempotency.execute(
      request,
      taken!.claim,
      (context) => {
        extendsBeforeHandler = store.calls.extend - extendsAtTake;
        return handler(context);
      },
      { renewedLease: taken!.renewedLease },
    );
    await jest.advanceTimersByTimeAsync(5_000);
    const result = await running;
    // Before the fix (the lease counted from the claim, 50 ms left): 1.
    expect(extendsBeforeHandler).toBe(0);
    expect(seen.aborted).toBeUndefined();
    expect(result).toMatchObject({ status: 'completed', result: 'done', recorded: true });
    expect(events.filter(([name]) => name === 'leaseLost')).toEqual([]);
    await set.releaseAll();
  });

  it("a set's last extension counts from when it was sent, not from its late reply: renewed once more when that leaves less than an interval", async () => {
    const { store, idempotency } = setup();
    const t0 = performance.now();
    const [reply] = await idempotency.claimMany([request], { reserve: false });
    // One extension, sent at 2500 ms and answered at 2700 ms; the next beat would come at 5200 ms.
    const set = new LeaseKeeperSet<number>(idempotency, { leaseMs: LEASE_MS, heartbeatIntervalMs: 2_500 });
    set.add(0, request, acquired(reply));
    set.start();
    await jest.advanceTimersByTimeAsync(4_600);
    const taken = await set.take(0);
    expect(taken?.renewedLease).toEqual({
      sentAt: t0 + 2_500,
      leaseMs: LEASE_MS,
      fencingToken: acquired(reply).fencingToken,
    });
    // 900 ms left from the send (less than the 1000 ms interval); from the reply it would be 1100 ms.
    const extendsAtTake = store.calls.extend;
    let extendsBeforeHandler = -1;
    const running = idempotency.execute(
      request,
      taken!.claim,
      () => {
        extendsBeforeHandler = store.calls.extend - extendsAtTake;
        return 'done';
      },
      { renewedLease: taken!.renewedLease },
    );
    await jest.advanceTimersByTimeAsync(1_000);
    expect(await running).toMatchObject({ status: 'completed', result: 'done' });
    expect(extendsBeforeHandler).toBe(1);
  });

  it("a renewedLease that is not a past send time, a lease >= 0 and the claim's fencing token is refused before the store is touched", async () => {
    const { store, idempotency } = setup();
    const claim = acquired(await idempotency.claim(request));
    const handler = jest.fn();
    const now = performance.now();
    const { fencingToken } = claim;
    for (const renewedLease of [
      { sentAt: now + 1, leaseMs: LEASE_MS, fencingToken },
      { sentAt: Number.NaN, leaseMs: LEASE_MS, fencingToken },
      { sentAt: now, leaseMs: -1, fencingToken },
      { sentAt: now, leaseMs: Number.POSITIVE_INFINITY, fencingToken },
      // A renewal of another claim (another token), or one that names none.
      { sentAt: now, leaseMs: LEASE_MS, fencingToken: fencingToken + 1 },
      { sentAt: now, leaseMs: LEASE_MS },
      null,
    ]) {
      await expect(
        idempotency.execute(request, claim, handler, { renewedLease: renewedLease as never }),
      ).rejects.toBeInstanceOf(InvalidOptionError);
    }
    expect(handler).not.toHaveBeenCalled();
    expect(store.calls.extend).toBe(0);
  });

  it('a claim with less than one heartbeat interval left (any counted claim): extended once before the handler starts', async () => {
    const { store, idempotency, events } = setup();
    const claim = acquired(await idempotency.claim(request));
    await jest.advanceTimersByTimeAsync(LEASE_MS - 300);
    let extendsBeforeHandler = -1;
    const { handler, seen } = working(100);
    const running = idempotency.execute(request, claim, (context) => {
      extendsBeforeHandler = store.calls.extend;
      return handler(context);
    });
    await jest.advanceTimersByTimeAsync(5_000);
    expect(await running).toMatchObject({ status: 'completed', result: 'done' });
    expect(extendsBeforeHandler).toBe(1);
    expect(seen.aborted).toBeUndefined();
    expect(events.filter(([name]) => name === 'leaseLost')).toEqual([]);
  });

  it('with at least one heartbeat interval left, no extension is sent before the handler', async () => {
    const { store, idempotency } = setup();
    const claim = acquired(await idempotency.claim(request));
    await jest.advanceTimersByTimeAsync(LEASE_MS - 1_000); // exactly one interval left
    const running = idempotency.execute(request, claim, () => store.calls.extend);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(await running).toMatchObject({ status: 'completed', result: 0 });
  });

  it('within the margin, a claim another worker took over meanwhile runs nothing', async () => {
    const { memory, idempotency, events } = setup();
    const claim = acquired(await idempotency.claim(request));
    await jest.advanceTimersByTimeAsync(LEASE_MS - 100);
    // The store's clock runs ahead: the lease has ended there, and a rival claims the key.
    offsetMs = 1_000;
    expect((await memory.claim(request, { leaseMs: 60_000, retentionMs: 60_000 })).outcome).toBe(
      'ACQUIRED_STALE',
    );
    const handler = jest.fn();
    const running = idempotency.execute(request, claim, handler);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(await running).toMatchObject({ status: 'lease-lost', handlerStarted: false });
    expect(handler).not.toHaveBeenCalled();
    expect(events.filter(([name]) => name === 'leaseLost')).toEqual([
      ['leaseLost', { ...request, fencingToken: claim.fencingToken, during: 'start' }],
    ]);
  });

  it('within the margin, an extension the store does not answer: StoreUnavailableError, nothing runs', async () => {
    const { store, idempotency } = setup();
    const claim = acquired(await idempotency.claim(request));
    await jest.advanceTimersByTimeAsync(LEASE_MS - 100);
    store.inject('extend', { kind: 'throw', error: () => new StoreUnavailableError('down') });
    const handler = jest.fn();
    const running = idempotency.execute(request, claim, handler);
    const outcome = expect(running).rejects.toBeInstanceOf(StoreUnavailableError);
    await jest.advanceTimersByTimeAsync(1_000);
    await outcome;
    expect(handler).not.toHaveBeenCalled();
  });

  it('the keeper still aborts a handler when no extension reaches the store for a whole lease', async () => {
    const { store, idempotency } = setup();
    const claim = acquired(await idempotency.claim(request));
    await jest.advanceTimersByTimeAsync(LEASE_MS - 100);
    const { handler, seen } = working(60_000);
    const running = idempotency.execute(request, claim, (context) => {
      store.breakAlways('extend', () => new StoreUnavailableError('down')); // after the renewal
      return handler(context);
    });
    await jest.advanceTimersByTimeAsync(LEASE_MS + 1_000);
    expect(seen.aborted).toBeInstanceOf(LeaseLostError);
    await jest.advanceTimersByTimeAsync(1_000);
    await running;
  });
});
