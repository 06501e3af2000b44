import { Idempotency, MemoryIdempotencyStore } from '@idempotent-consumer/core';
import { AdapterLog, StoreGate, TypedEventEmitter } from '@idempotent-consumer/core/kit';
import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import { headers } from '@nats-io/nats-core';
import type { NatsIdempotencyEvents } from '../src/events';
import type { NatsHandler } from '../src/handler';
import { NatsMessagePort } from '../src/message-port';
import { resolveNatsOptions } from '../src/options';

/** A delivered message whose acknowledgements are recorded in `calls`. */
function delivery(key: string | undefined, body = 'pay', deliveryCount = 1, seq = 1) {
  const calls: string[] = [];
  const h = headers();
  if (key) h.set('Nats-Msg-Id', key);
  const message = {
    subject: 'pay.eu',
    seq,
    data: new TextEncoder().encode(body),
    headers: h,
    info: { stream: 'PAY', consumer: 'charger', deliveryCount, streamSequence: seq },
    ack: () => calls.push('ack'),
    nak: (ms?: number) => calls.push(`nak ${ms}`),
    term: () => calls.push('term'),
    working: () => calls.push('working'),
  } as unknown as JsMsg;
  return { message, calls };
}

/** Resolves once `check` holds, looking again at every turn of the event loop. */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setImmediate(resolve));
}

function setup<T>(
  handler: NatsHandler<T>,
  options: { leaseMs?: number; publish?: () => Promise<unknown> } = {},
) {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store }, { leaseMs: options.leaseMs ?? 5000, maxAttempts: 3 });
  const events = new TypedEventEmitter<NatsIdempotencyEvents>();
  const published: { subject: string; headers: Record<string, string> }[] = [];
  const jetstream = {
    publish: async (subject: string, _data: Uint8Array, opts: { headers: Iterable<[string, string[]]> }) => {
      await options.publish?.();
      const flat = Object.fromEntries([...opts.headers].map(([k, v]) => [k, v.join(',')]));
      published.push({ subject, headers: flat });
    },
  } as unknown as JetStreamClient;
  const stopping = new AbortController();
  const port = new NatsMessagePort<T>({
    idempotency,
    jetstream,
    options: resolveNatsOptions({
      stream: 'PAY',
      consumer: 'charger',
      deadLetterSubject: 'dead.pay',
      conflictWaitMs: 10_000,
      retryBackoff: { baseMs: 100, maxMs: 100, jitter: 'none' },
      telemetry: false,
    }),
    limits: { ackWaitMs: 30_000, maxDeliver: -1, deadLetter: { subject: 'dead.pay', stream: 'DEAD' } },
    handler,
    events,
    gate: new StoreGate(store),
    log: AdapterLog.silent,
    stopping: stopping.signal,
    abandoning: new AbortController().signal,
  });
  const settled: NatsIdempotencyEvents['settled'][0][] = [];
  events.on('settled', (e) => settled.push(e));
  return { port, events, settled, published, stopping };
}

describe('NatsMessagePort', () => {
  it('acks a completed message and a duplicate of it; the handler runs once with the message', async () => {
    const seen: JsMsg[] = [];
    const { port, settled } = setup(({ message }) => {
      seen.push(message);
      return 'charged';
    });
    const first = delivery('pay-1');
    const again = delivery('pay-1', 'pay', 1, 2);
    await port.process(first.message);
    await port.process(again.message);
    expect(seen).toEqual([first.message]);
    expect(first.calls).toEqual(['ack']);
    expect(again.calls).toEqual(['ack']);
    expect(settled.map((e) => [e.outcome, e.decision])).toEqual([
      ['ACQUIRED', { action: 'ack', reason: 'completed' }],
      ['DUPLICATE', { action: 'ack', reason: 'duplicate' }],
    ]);
    expect(settled[1]!.source).toEqual({
      stream: 'PAY',
      consumer: 'charger',
      subject: 'pay.eu',
      streamSequence: 2,
      deliveryCount: 1,
    });
  });

  it('naks a retryable error after its backoff and reports retryScheduled', async () => {
    const { port, events } = setup(() => {
      throw new Error('gateway timeout');
    });
    const retries: NatsIdempotencyEvents['retryScheduled'][0][] = [];
    events.on('retryScheduled', (e) => retries.push(e));
    const { message, calls } = delivery('pay-2');
    await port.process(message);
    expect(calls).toEqual(['nak 100']);
    expect(retries).toMatchObject([{ key: 'pay-2', reason: 'handler-error', delayMs: 100 }]);
    expect((retries[0]!.error as Error).message).toBe('gateway timeout');
  });

  it('dead-letters with the kit fields as headers, then terms; a failed publish is a nak', async () => {
    let refuse = true;
    const { port, published, settled } = setup(
      () => {
        throw new Error('never');
      },
      {
        publish: async () => {
          if (refuse) throw new Error('no responders');
        },
      },
    );
    const failed = delivery(undefined, 'no key');
    await port.process(failed.message);
    expect(failed.calls).toEqual(['nak 100']);
    expect(settled[0]!.decision).toEqual({ action: 'nak', reason: 'dead-letter-failed', delayMs: 100 });
    refuse = false;
    const again = delivery(undefined, 'no key', 2);
    await port.process(again.message);
    expect(again.calls).toEqual(['term']);
    expect(published).toEqual([
      {
        subject: 'dead.pay',
        headers: {
          'x-idempotency-dead-letter-reason': 'missing-key',
          'x-idempotency-outcome': 'NONE',
          'x-idempotency-error':
            'MissingKeyError [MISSING_IDEMPOTENCY_KEY]: The message carries no idempotency key',
          'x-idempotency-attempt': '0',
          'x-idempotency-scope': 'PAY/charger',
          'x-original-stream': 'PAY',
          'x-original-subject': 'pay.eu',
          'x-original-sequence': '1',
        },
      },
    ]);
  });

  it('calls working() on the lease heartbeats of a running handler', async () => {
    const { message, calls } = delivery('pay-3');
    const { port } = setup(() => until(() => calls.filter((c) => c === 'working').length >= 2), {
      leaseMs: 60,
    });
    await port.process(message);
    expect(calls.at(-1)).toBe('ack');
  });

  it('keeps a duplicate alive with working() while it waits for the holder, then acks it', async () => {
    let release!: () => void;
    const holding = new Promise<void>((resolve) => {
      release = resolve;
    });
    const runs: string[] = [];
    const { port, settled } = setup(async ({ outcome }) => {
      runs.push(outcome);
      await holding;
    });
    const holder = delivery('pay-4');
    const duplicate = delivery('pay-4', 'pay', 1, 2);
    const first = port.process(holder.message);
    await until(() => runs.length === 1);
    const second = port.process(duplicate.message);
    await until(() => duplicate.calls.includes('working'));
    release();
    await Promise.all([first, second]);
    expect(runs).toEqual(['ACQUIRED']);
    expect(duplicate.calls.at(-1)).toBe('ack');
    expect(settled.map((e) => e.decision)).toContainEqual({ action: 'ack', reason: 'duplicate' });
  });

  it('a stopping consumer starts no handler: the claim is given back and the message nak-ed at once', async () => {
    let runs = 0;
    const { port, stopping } = setup(() => {
      runs += 1;
    });
    stopping.abort();
    const { message, calls } = delivery('pay-5');
    await port.process(message);
    expect(runs).toBe(0);
    expect(calls).toEqual(['nak 0']);
  });
});
