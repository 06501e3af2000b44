import { performance } from 'node:perf_hooks';
import {
  type AcquiredReply,
  type ClaimReply,
  Idempotency,
  LeaseLostError,
  MemoryIdempotencyStore,
  StoreUnavailableError,
} from '../src';
import { LeaseKeeperSet } from '../src/kit';
import { FaultyStore, recordEvents } from './support/faulty-store';

// A counted claim handed to `execute` close to the end of its lease (by the local clock, counted from when
// it was requested): one held in a LeaseKeeperSet while the set extended it in the store (`take` hands over
// the claim's own reply), or any claim that waited. The runner's lease keeper gives its first beat half of
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

  it('a counted claim a LeaseKeeperSet kept alive, taken 50 ms before its own lease end: runs and completes, not lost', async () => {
    const { memory, store, idempotency, events } = setup();
    const [reply] = await idempotency.claimMany([request], { reserve: false });
    const claim = acquired(reply);
    expect(claim.started).toBe(true);
    // The set extends on the inner store (its extensions are not the subject here).
    const set = new LeaseKeeperSet<number>(memory, {
      leaseMs: LEASE_MS,
      retentionMs: 60_000,
      heartbeatIntervalMs: 1_000,
    });
    set.add(0, request, claim);
    set.start();
    await jest.advanceTimersByTimeAsync(LEASE_MS - 50); // extended at 1000 and 2000 ms
    // The store holds the lease: a rival meets CONFLICT.
    expect((await memory.claim(request, { leaseMs: 1, retentionMs: 1 })).outcome).toBe('CONFLICT');
    const taken = await set.take(0);
    expect(taken).toBe(claim); // the claim's own reply: its lease counts from the claim
    const { handler, seen } = working(1_500);
    const running = idempotency.execute(request, taken!, handler);
    await jest.advanceTimersByTimeAsync(5_000);
    const result = await running;
    expect(seen.aborted).toBeUndefined();
    expect(result).toMatchObject({ status: 'completed', result: 'done', recorded: true });
    expect(events.filter(([name]) => name === 'leaseLost')).toEqual([]);
    // One extension before the handler (the lease is renewed from now), then the keeper's own.
    expect(store.calls.extend).toBeGreaterThanOrEqual(1);
    await set.releaseAll();
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
