import { performance } from 'node:perf_hooks';
import { InvalidOptionError, MemoryIdempotencyStore, StoreUnavailableError } from '../../src';
import { StoreGate } from '../../src/kit';
import { FaultyStore } from '../support/faulty-store';

const down = () => new StoreUnavailableError('Redis did not answer');
const fast = { storeProbeBackoff: { baseMs: 2, maxMs: 10, jitter: 'none' as const } };

/** A gate on a store whose ping fails `failures` times, with what it reported. */
function setup(failures: number, options = fast) {
  const store = new FaultyStore(new MemoryIdempotencyStore()).inject(
    'ping',
    { kind: 'throw', error: down },
    failures,
  );
  const events: [string, unknown][] = [];
  let recovered!: (downMs: number) => void;
  const recovery = new Promise<number>((resolve) => {
    recovered = resolve;
  });
  const gate = new StoreGate(store, options, {
    onStoreUnavailable: (e) => events.push(['storeUnavailable', e]),
    onStoreRecovered: (e) => {
      events.push(['storeRecovered', e]);
      recovered(e.downMs);
    },
    onProbeFailed: (e) => events.push(['probeFailed', e.probe]),
  });
  return { store, gate, events, recovery };
}

describe('kit: StoreGate', () => {
  it('is open until closed; an open gate lets waiters through at once', async () => {
    const { gate, store } = setup(0);
    expect(gate.closed).toBe(false);
    await expect(gate.waitUntilOpen()).resolves.toBe(true);
    await expect(gate.waitUntilOpenWithin(0)).resolves.toBe(true);
    expect(store.calls.ping).toBe(0);
  });

  it('closes on a StoreUnavailableError, pings until the store answers, then opens and wakes every waiter', async () => {
    const { gate, store, events, recovery } = setup(3);
    const error = down();
    expect(gate.closeIfUnavailable(error)).toBe(true);
    expect(gate.closed).toBe(true);
    const waiters = [gate.waitUntilOpen(), gate.waitUntilOpen(), gate.waitUntilOpenWithin(60_000)];
    await expect(Promise.all(waiters)).resolves.toEqual([true, true, true]);
    expect(gate.closed).toBe(false);
    expect(store.calls.ping).toBe(4);
    const downMs = await recovery;
    expect(events).toEqual([
      ['storeUnavailable', { error }],
      ['probeFailed', 1],
      ['probeFailed', 2],
      ['probeFailed', 3],
      ['storeRecovered', { downMs }],
    ]);
    expect(downMs).toBeGreaterThanOrEqual(0);
  });

  it('ignores errors that are not StoreUnavailableError', () => {
    const { gate, events } = setup(0);
    expect(gate.closeIfUnavailable(new Error('handler bug'))).toBe(false);
    expect(gate.closeIfUnavailable(undefined)).toBe(false);
    expect(gate.closed).toBe(false);
    expect(events).toEqual([]);
  });

  it('runs one probe loop however often it is closed and however many wait: pings never overlap', async () => {
    const store = new MemoryIdempotencyStore();
    let inFlight = 0;
    let most = 0;
    let pings = 0;
    const slowPing = {
      async ping() {
        pings++;
        inFlight++;
        most = Math.max(most, inFlight);
        await new Promise((r) => setTimeout(r, 5));
        inFlight--;
        if (pings < 4) throw down();
        return store.ping();
      },
    };
    const unavailable: unknown[] = [];
    const gate = new StoreGate(slowPing, fast, { onStoreUnavailable: (e) => unavailable.push(e.error) });
    expect(gate.close(down())).toBe(true);
    const waiters: Promise<boolean>[] = [];
    for (let i = 0; i < 20; i++) {
      expect(gate.close(down())).toBe(false);
      waiters.push(gate.waitUntilOpen());
    }
    await expect(Promise.all(waiters)).resolves.toEqual(Array(20).fill(true));
    expect(most).toBe(1);
    expect(pings).toBe(4);
    expect(unavailable).toHaveLength(1);
  });

  it('waitUntilOpen ends early with false when its signal aborts; the gate stays closed and others keep waiting', async () => {
    const { gate } = setup(1_000_000);
    gate.close(down());
    const controller = new AbortController();
    const mine = gate.waitUntilOpen(controller.signal);
    let otherDone = false;
    const other = gate.waitUntilOpen().then((open) => {
      otherDone = true;
      return open;
    });
    controller.abort();
    await expect(mine).resolves.toBe(false);
    expect(gate.closed).toBe(true);
    expect(otherDone).toBe(false);
    gate.dispose();
    await expect(other).resolves.toBe(false);
    const aborted = new AbortController();
    aborted.abort();
    await expect(gate.waitUntilOpen(aborted.signal)).resolves.toBe(false);
  });

  it('waitUntilOpenWithin counts each ping’s own time: a ping that hangs does not stretch the wait', async () => {
    // Kafka's old inline wait counted only its sleeps: with pings hanging until a command timeout it
    // waited about (timeout + interval) per try. Here every ping hangs 2 s; the wait is bounded to 100 ms.
    const store = new FaultyStore(new MemoryIdempotencyStore()).inject(
      'ping',
      { kind: 'hangThenThrow', ms: 2_000, error: down },
      1_000_000,
    );
    const gate = new StoreGate(store, { storeProbeBackoff: { baseMs: 1, maxMs: 1, jitter: 'none' } });
    gate.close(down());
    const started = performance.now();
    await expect(gate.waitUntilOpenWithin(100)).resolves.toBe(false);
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(95);
    expect(waited).toBeLessThan(1_900);
    gate.dispose();
  });

  it('waitUntilOpenWithin resolves true as soon as the store answers within the bound', async () => {
    const { gate } = setup(2);
    gate.close(down());
    await expect(gate.waitUntilOpenWithin(60_000)).resolves.toBe(true);
  });

  it('dispose stops the probe loop and wakes waiters with false; a disposed gate does not close again', async () => {
    const { gate, store } = setup(1_000_000);
    gate.close(down());
    const waiting = gate.waitUntilOpen();
    gate.dispose();
    await expect(waiting).resolves.toBe(false);
    const pings = store.calls.ping;
    await new Promise((r) => setTimeout(r, 30));
    expect(store.calls.ping).toBeLessThanOrEqual(pings + 1); // at most the ping in flight
    expect(gate.disposed).toBe(true);
    const fresh = setup(0).gate;
    fresh.dispose();
    expect(fresh.close(down())).toBe(false);
    expect(fresh.closed).toBe(false);
  });

  it('a callback that throws changes nothing', async () => {
    const store = new FaultyStore(new MemoryIdempotencyStore()).inject(
      'ping',
      { kind: 'throw', error: down },
      2,
    );
    const boom = () => {
      throw new Error('listener bug');
    };
    const gate = new StoreGate(store, fast, {
      onStoreUnavailable: boom,
      onProbeFailed: boom,
      onStoreRecovered: boom,
    });
    expect(gate.close(down())).toBe(true);
    await expect(gate.waitUntilOpen()).resolves.toBe(true);
    expect(gate.closed).toBe(false);
  });

  it('closes again after recovering, with a new probe loop and new reports', async () => {
    const { gate, store, events } = setup(1);
    gate.close(down());
    await gate.waitUntilOpen();
    store.inject('ping', { kind: 'throw', error: down }, 1);
    expect(gate.close(down())).toBe(true);
    await expect(gate.waitUntilOpen()).resolves.toBe(true);
    expect(events.map(([name]) => name)).toEqual([
      'storeUnavailable',
      'probeFailed',
      'storeRecovered',
      'storeUnavailable',
      'probeFailed',
      'storeRecovered',
    ]);
  });

  it('waits storeProbeBackoff before each ping (the first after the gate closed)', async () => {
    const times: number[] = [];
    const store = {
      async ping() {
        times.push(performance.now());
        if (times.length < 3) throw down();
      },
    };
    const gate = new StoreGate(store, {
      storeProbeBackoff: { baseMs: 20, factor: 2, maxMs: 1000, jitter: 'none' },
    });
    const closedAt = performance.now();
    gate.close(down());
    await gate.waitUntilOpen();
    expect(times).toHaveLength(3);
    // Timers never fire early (a loaded machine only makes them late).
    expect(times[0]! - closedAt).toBeGreaterThanOrEqual(19);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(39);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(79);
  });

  it('checks storeProbeBackoff when it is built', () => {
    const store = new MemoryIdempotencyStore();
    expect(() => new StoreGate(store, { storeProbeBackoff: { baseMs: -1 } })).toThrow(InvalidOptionError);
    expect(() => new StoreGate(store, { storeProbeBackoff: { factor: 0 } })).toThrow(
      /^storeProbeBackoff\.factor must be a finite number >= 1/,
    );
  });

  it("follow: the first unanswered write or extension of the runner's runs closes the gate at once, failing closed only", async () => {
    const { EventEmitter } = await import('node:events');
    const runner = Object.assign(new EventEmitter(), { options: { storeFailureMode: 'closed' } });
    const { gate, events } = setup(0);
    const closedBy: unknown[] = [];
    const unfollow = gate.follow(runner as never, (error, subject) => closedBy.push([error, subject]));
    const subject = { scope: 's', key: 'k' };
    // Not the runner's to report: a claim (the consumer closes the gate itself), another error, no subject.
    runner.emit('storeError', { operation: 'claim', error: down(), subject });
    runner.emit('storeError', { operation: 'complete', error: new Error('bug'), subject });
    expect(gate.closed).toBe(false);
    runner.options.storeFailureMode = 'open';
    runner.emit('storeError', { operation: 'complete', error: down(), subject });
    expect(gate.closed).toBe(false); // failing open, the consumer does not pause for it
    runner.options.storeFailureMode = 'closed';
    const error = down();
    runner.emit('storeError', { operation: 'complete', error, subject });
    expect(gate.closed).toBe(true);
    expect(events[0]).toEqual(['storeUnavailable', { error }]);
    runner.emit('storeError', { operation: 'extend', error: down(), subject }); // closed already
    expect(closedBy).toEqual([[error, subject]]);
    unfollow();
    expect(runner.listenerCount('storeError')).toBe(0);
    await gate.waitUntilOpen();
  });
});
