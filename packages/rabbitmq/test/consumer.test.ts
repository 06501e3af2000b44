import { setTimeout as sleep } from 'node:timers/promises';
import {
  Idempotency,
  MemoryIdempotencyStore,
  NonRetryableError,
  type RecordId,
  StoreUnavailableError,
  UnexpectedReplyError,
  type WriteReply,
} from '@idempotent-consumer/core';
import { nextClaimWrittenThenUnanswered } from '../../../integration-tests/support/written-claim';
import {
  createIdempotentConsumer,
  DEAD_LETTER_HEADERS,
  type RabbitMqIdempotencyOptions,
  RETRY_HEADERS,
} from '../src';
import { type FakeChannel, fakeConnection, type Journal } from './fake-amqp';

/** A memory store that journals its writes, and can be switched off (every call rejects). */
class RecordingStore extends MemoryIdempotencyStore {
  down = false;
  constructor(readonly journal: Journal) {
    super();
  }
  #check(): void {
    if (this.down) throw new StoreUnavailableError('store is down');
  }
  override async claim(...args: Parameters<MemoryIdempotencyStore['claim']>) {
    this.#check();
    return super.claim(...args);
  }
  override async complete(id: RecordId, token: number, options: { retentionMs: number; result?: string }) {
    this.#check();
    this.journal.push(`complete:${id.key}`);
    return super.complete(id, token, options);
  }
  override async release(id: RecordId, token: number, options: { retentionMs: number }): Promise<WriteReply> {
    this.#check();
    this.journal.push(`release:${id.key}`);
    return super.release(id, token, options);
  }
  override async ping(): Promise<void> {
    this.#check();
  }
}

const FAST: Partial<RabbitMqIdempotencyOptions> = {
  delayTiersMs: [10, 50, 200],
  retryBackoff: { baseMs: 10, maxMs: 50, jitter: 'none' },
  storeProbeBackoff: { baseMs: 5, maxMs: 20, jitter: 'none' },
};

async function setup(
  handler: Parameters<typeof createIdempotentConsumer>[2],
  options = {},
  runnerOptions: { storeFailureMode?: 'open' | 'closed' } = {},
) {
  const fake = fakeConnection();
  const store = new RecordingStore(fake.journal);
  const idempotency = new Idempotency(
    { store, logger: false },
    { leaseMs: 1000, maxAttempts: 3, ...runnerOptions },
  );
  const consumer = createIdempotentConsumer(
    { idempotency, connection: fake.connection, logger: false },
    { queue: 'work', ...FAST, ...options },
    handler,
  );
  await consumer.start();
  return { ...fake, store, idempotency, consumer };
}

const until = async (what: string, check: () => boolean, timeoutMs = 2000) => {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
};

describe('IdempotentConsumer with a fake channel', () => {
  it('writes COMPLETED before the ack', async () => {
    const { channel, journal, consumer } = await setup(() => 'ok');
    channel.deliver('{}', { messageId: 'k1' });
    await until('ack', () => channel.acked.length === 1);
    expect(journal.filter((j) => j !== 'consume')).toEqual(['complete:k1', 'ack:1']);
    await consumer.stop();
  });

  it('acks a CONFLICT only after the delay-tier copy is confirmed, with the remaining lease as delay', async () => {
    // No wait for the holder here: the republish path itself is under test.
    const { channel, confirm, idempotency, journal, consumer } = await setup(() => 'ok', {
      conflictWaitMs: 0,
    });
    await idempotency.claim({ scope: 'work', key: 'held' }, { leaseMs: 40 });
    confirm.autoConfirm = false;
    channel.deliver('{}', { messageId: 'held' });
    await until('publish', () => confirm.published.length === 1);
    expect(confirm.published[0]).toMatchObject({ exchange: '', routingKey: 'work.delay.50ms' });
    expect(confirm.published[0]!.options.headers[RETRY_HEADERS.reason]).toBe('conflict');
    expect(confirm.published[0]!.options.mandatory).toBe(true);
    await sleep(20);
    expect(channel.acked).toEqual([]); // not before the confirm
    confirm.published[0]!.confirm();
    await until('ack', () => channel.acked.length === 1);
    expect(journal.slice(-2)).toEqual(['confirmed:work.delay.50ms', 'ack:1']);
    await consumer.stop();
  });

  it('never acks when the republish is nacked by the broker; requeues after the delay instead', async () => {
    const { channel, confirm, consumer } = await setup(() => {
      throw new Error('boom');
    });
    confirm.autoConfirm = false;
    const events: string[] = [];
    consumer.on('brokerError', (e) => events.push(`brokerError:${e.operation}`));
    consumer.on('settled', (e) => events.push(`${e.decision.action}:${e.decision.reason}`));
    channel.deliver('{}', { messageId: 'k' });
    await until('publish', () => confirm.published.length === 1);
    confirm.published[0]!.confirm(new Error('nack'));
    await until('requeue', () => channel.nacked.length === 1);
    expect(channel.acked).toEqual([]);
    expect(channel.nacked).toEqual([{ tag: 1, requeue: true }]);
    expect(events).toEqual(['brokerError:publish', 'requeue:publish-failed']);
    await consumer.stop();
  });

  it('dead-letters a non-retryable error with its headers, then acks', async () => {
    const { channel, confirm, consumer } = await setup(() => {
      throw new NonRetryableError('declined');
    });
    channel.deliver('{}', { messageId: 'k', headers: { trace: 'abc' } });
    await until('ack', () => channel.acked.length === 1);
    expect(confirm.published).toHaveLength(1);
    const { exchange, routingKey, options } = confirm.published[0]!;
    expect({ exchange, routingKey }).toEqual({ exchange: 'work.dlx', routingKey: 'work' });
    expect(options.messageId).toBe('k');
    expect(options.headers).toMatchObject({
      trace: 'abc',
      [DEAD_LETTER_HEADERS.reason]: 'non-retryable',
      [DEAD_LETTER_HEADERS.outcome]: 'ACQUIRED',
      [DEAD_LETTER_HEADERS.attempt]: 1,
      [DEAD_LETTER_HEADERS.key]: 'k',
      [DEAD_LETTER_HEADERS.scope]: 'work',
      [DEAD_LETTER_HEADERS.originalQueue]: 'work',
    });
    await consumer.stop();
  });

  it('fails closed when the store is down: cancels, requeues, acks nothing, probes, consumes again', async () => {
    let runs = 0;
    const { channel, store, consumer } = await setup(() => {
      runs += 1;
    });
    const events: string[] = [];
    consumer.on('storeUnavailable', () => events.push('paused'));
    consumer.on('storeRecovered', () => events.push('resumed'));
    store.down = true;
    channel.deliver('{}', { messageId: 'a' });
    channel.deliver('{}', { messageId: 'b' });
    await until('both requeued', () => channel.nacked.length === 2);
    expect(channel.nacked.every((n) => n.requeue)).toBe(true);
    expect(channel.acked).toEqual([]);
    expect(channel.cancels).toBe(1);
    expect(consumer.state).toBe('paused');
    await sleep(50);
    expect(channel.consumes).toBe(1); // still paused while the store is down
    store.down = false;
    await until('resumed', () => events.includes('resumed'));
    expect(channel.consumes).toBe(2);
    expect(consumer.state).toBe('running');
    channel.deliver('{}', { messageId: 'a' });
    await until('ack', () => channel.acked.length === 1);
    expect(runs).toBe(1);
    expect(events).toEqual(['paused', 'resumed']);
    await consumer.stop();
  });

  it("the broker's basic.cancel while paused closes the consumer with a cancelled event, as while running; the resume consumes nothing", async () => {
    const { channel, store, consumer } = await setup(() => 'ok');
    const cancelled: unknown[] = [];
    consumer.on('cancelled', (e) => cancelled.push(e));
    // The broker's basic.cancel reaches the callback registered at basic.consume, whatever our own cancel did.
    const brokerCancels = channel.onMessage!;
    store.down = true;
    channel.deliver('{}', { messageId: 'a' });
    await until('requeued', () => channel.nacked.length === 1);
    expect(consumer.state).toBe('paused');
    brokerCancels(null);
    expect(cancelled).toEqual([{ queue: 'work' }]);
    expect(consumer.state).toBe('closed');
    const recovered = new Promise((resolve) => consumer.once('storeRecovered', resolve));
    store.down = false;
    await recovered;
    await consumer.stop();
    expect(channel.consumes).toBe(1);
    expect(cancelled).toHaveLength(1);
  });

  it('settles each delivery once even if a listener throws', async () => {
    const { channel, consumer } = await setup(() => 'ok');
    consumer.on('settled', () => {
      throw new Error('listener bug');
    });
    channel.deliver('{}', { messageId: 'x' });
    await until('ack', () => channel.acked.length === 1);
    await sleep(10);
    expect(channel.acked).toEqual([1]);
    expect(channel.nacked).toEqual([]);
    await consumer.stop();
  });

  it('stop() cancels, waits for the handler in flight, and lets it ack', async () => {
    let release: () => void = () => {};
    const { channel, consumer } = await setup(() => new Promise<void>((r) => (release = r)));
    channel.deliver('{}', { messageId: 'slow' });
    await sleep(5);
    const stopped = consumer.stop();
    await sleep(5);
    expect(consumer.state).toBe('stopping');
    release();
    await stopped;
    expect(channel.acked).toEqual([1]);
    expect(consumer.state).toBe('stopped');
  });

  it('a CONFLICT waits for the holder first: its complete answers DUPLICATE and the copy is acked, not republished', async () => {
    const { channel, confirm, idempotency, consumer } = await setup(() => 'ok');
    const held = await idempotency.claim({ scope: 'work', key: 'held' }, { leaseMs: 60_000 });
    channel.deliver('{}', { messageId: 'held' });
    await sleep(30);
    expect(channel.acked).toEqual([]);
    if (held.outcome !== 'ACQUIRED') throw new Error(held.outcome);
    await idempotency.execute({ scope: 'work', key: 'held' }, held, () => 'done');
    await until('ack', () => channel.acked.length === 1);
    expect(confirm.published).toEqual([]);
    await consumer.stop();
  });

  it('a consume channel closed by the broker is reopened on the same connection and consumed again', async () => {
    const { channel, consumeChannels, consumer } = await setup(() => 'ok', {
      reconnectBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' },
    });
    const reconnected = new Promise((resolve) => consumer.once('reconnected', resolve));
    const closed: unknown[] = [];
    consumer.on('channelClosed', (e) => closed.push(e.channel));
    channel.emit('close');
    await reconnected;
    expect(closed).toEqual(['consume']);
    expect(consumeChannels).toHaveLength(2);
    expect(consumeChannels[1]!.consumes).toBe(1);
    expect(consumer.state).toBe('running');
    consumeChannels[1]!.deliver('{}', { messageId: 'after' });
    await until('ack', () => consumeChannels[1]!.acked.length === 1);
    await consumer.stop();
  });

  it('a delivery in flight when its channel closes completes, is never acked on the new channel, and its redelivery is a DUPLICATE', async () => {
    let release: () => void = () => {};
    let runs = 0;
    const { channel, consumeChannels, consumer } = await setup(
      () => {
        runs += 1;
        return new Promise<void>((r) => (release = r));
      },
      { reconnectBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' } },
    );
    const brokerErrors: string[] = [];
    consumer.on('brokerError', (e) => brokerErrors.push(e.operation));
    channel.deliver('{}', { messageId: 'in-flight' });
    await until('the handler to start', () => runs === 1);
    const reconnected = new Promise((resolve) => consumer.once('reconnected', resolve));
    channel.emit('close');
    await reconnected;
    release();
    await until('the failed ack to be reported', () => brokerErrors.includes('ack'));
    const fresh = consumeChannels[1]!;
    expect(channel.acked).toEqual([]);
    expect(fresh.acked).toEqual([]);
    fresh.deliver('{}', { messageId: 'in-flight' }); // RabbitMQ's redelivery
    await until('the redelivery acked', () => fresh.acked.length === 1);
    expect(runs).toBe(1);
    await consumer.stop();
  });
});

/**
 * Delivers `k` with a copy awaiting its confirm, closes the consume channel (a reconnect), then confirms the
 * copy: the original's ack fails. Returns the consumer's listeners' view; the redelivery is for the test.
 */
async function confirmAfterChannelClosed(handler: Parameters<typeof createIdempotentConsumer>[2]) {
  const fake = await setup(handler, { reconnectBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' } });
  const { channel, confirm, consumer } = fake;
  confirm.autoConfirm = false;
  const reported: unknown[] = [];
  consumer.on('deadLettered', (e) => reported.push(`deadLettered:${e.key}`));
  consumer.on('retryScheduled', (e) => reported.push(`retryScheduled:${e.delayQueue}`));
  channel.deliver('{}', { messageId: 'k' });
  await until('the copy', () => confirm.published.length === 1);
  const reconnected = new Promise((resolve) => consumer.once('reconnected', resolve));
  channel.emit('close');
  await reconnected;
  const ackFailed = new Promise((resolve) => consumer.once('brokerError', resolve));
  confirm.published[0]!.confirm(); // the copy is confirmed; the original's ack fails
  await ackFailed;
  return { ...fake, reported };
}

describe('IdempotentConsumer failure paths', () => {
  it('a dead-letter copy confirmed after its channel closed is reported deadLettered: its redelivery is acked without another copy or report', async () => {
    const { consumeChannels, confirm, consumer, reported } = await confirmAfterChannelClosed(() => {
      throw new NonRetryableError('bad');
    });
    const settled = new Promise((resolve) => consumer.once('settled', resolve));
    consumeChannels[1]!.deliver('{}', { messageId: 'k' }, true); // RabbitMQ's redelivery
    expect(await settled).toMatchObject({ decision: { action: 'ack', reason: 'dead-lettered-before' } });
    expect(confirm.published).toHaveLength(1);
    expect(reported).toEqual(['deadLettered:k']);
    await consumer.stop();
  });

  it('a delay-tier copy confirmed after its channel closed is reported retryScheduled: its redelivery runs again, is copied again and reported again', async () => {
    let runs = 0;
    const { consumeChannels, confirm, consumer, reported } = await confirmAfterChannelClosed(() => {
      runs += 1;
      throw new Error('transient');
    });
    expect(reported).toEqual([`retryScheduled:${confirm.published[0]!.routingKey}`]);
    confirm.autoConfirm = true;
    const settled = new Promise((resolve) => consumer.once('settled', resolve));
    consumeChannels[1]!.deliver('{}', { messageId: 'k' }, true); // RabbitMQ's redelivery
    expect(await settled).toMatchObject({ decision: { action: 'retry', reason: 'handler-error' } });
    expect(runs).toBe(2);
    expect(confirm.published).toHaveLength(2);
    expect(reported).toEqual(confirm.published.map((p) => `retryScheduled:${p.routingKey}`));
    await consumer.stop();
  });

  it('an unprotected run whose dead-letter copy fails is not run again: its redelivery is dead-lettered without the handler', async () => {
    let runs = 0;
    const { channel, confirm, consumer } = await setup(
      () => {
        runs += 1;
        throw new NonRetryableError('bad');
      },
      { missingKey: 'process', idempotencyKey: () => undefined },
    );
    confirm.autoConfirm = false;
    channel.deliver('{"n":1}');
    await until('the dead-letter publish', () => confirm.published.length === 1);
    confirm.published[0]!.confirm(new Error('nack'));
    await until('the requeue', () => channel.nacked.length === 1);
    expect(channel.acked).toEqual([]);
    confirm.autoConfirm = true;
    channel.deliver('{"n":1}', {}, true); // RabbitMQ's redelivery of the requeued message
    await until('the ack of the redelivery', () => channel.acked.length === 1);
    expect(runs).toBe(1);
    expect(confirm.published.map((p) => p.options.headers?.[DEAD_LETTER_HEADERS.reason])).toEqual([
      'non-retryable',
      'non-retryable',
    ]);
    await consumer.stop();
  });

  it('an unprotected run whose retry copy keeps failing runs at most maxAttempts times, then is dead-lettered', async () => {
    let runs = 0;
    const { channel, confirm, consumer } = await setup(
      () => {
        runs += 1;
        throw new Error('boom');
      },
      { missingKey: 'process', idempotencyKey: () => undefined },
    );
    confirm.autoConfirm = false;
    const nackAll = setInterval(() => {
      for (const p of confirm.published.splice(0)) p.confirm(new Error('nack'));
    }, 1);
    channel.deliver('{}');
    for (let i = 1; i <= 5; i++) {
      await until(`requeue ${i}`, () => channel.nacked.length === i);
      channel.deliver('{}', {}, true);
    }
    await until('requeue 6', () => channel.nacked.length === 6);
    clearInterval(nackAll);
    expect(runs).toBe(3); // maxAttempts
    expect(channel.acked).toEqual([]);
    await consumer.stop();
  });

  it("an unprotected handler's signal aborts when the consumer stops", async () => {
    let started = false;
    let aborted = false;
    const { channel, consumer } = await setup(
      async ({ signal }) => {
        started = true;
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        aborted = true;
      },
      { missingKey: 'process', idempotencyKey: () => undefined },
    );
    channel.deliver('{}');
    await until('the handler started', () => started);
    await consumer.stop();
    expect(aborted).toBe(true);
  });

  it('a fingerprint function that throws dead-letters the delivery as invalid-key with an InvalidPayloadError; nothing pauses', async () => {
    let runs = 0;
    const { channel, confirm, consumer } = await setup(
      () => {
        runs += 1;
      },
      {
        fingerprint: () => {
          throw new Error('unparsable');
        },
      },
    );
    const invalid: unknown[] = [];
    const paused: unknown[] = [];
    consumer.on('invalidKey', (e) => invalid.push(e.error));
    consumer.on('storeUnavailable', (e) => paused.push(e));
    channel.deliver('{}', { messageId: 'k' });
    await until('the ack', () => channel.acked.length === 1);
    expect(runs).toBe(0);
    expect(paused).toEqual([]);
    expect(consumer.state).toBe('running');
    expect(invalid).toHaveLength(1);
    expect((invalid[0] as Error).name).toBe('InvalidPayloadError');
    expect(confirm.published[0]!.options.headers?.[DEAD_LETTER_HEADERS.reason]).toBe('invalid-key');
    await consumer.stop();
  });

  it('a store error that is not an outage requeues the delivery later without pausing', async () => {
    const { channel, store, consumer } = await setup(() => 'ok');
    store.claim = async () => {
      throw new UnexpectedReplyError('garbage');
    };
    const errors: unknown[] = [];
    consumer.on('storeError', (e) => errors.push(e.error));
    const paused: unknown[] = [];
    consumer.on('storeUnavailable', (e) => paused.push(e));
    channel.deliver('{}', { messageId: 'k' });
    await until('the requeue', () => channel.nacked.length === 1);
    expect(channel.acked).toEqual([]);
    expect(paused).toEqual([]);
    expect(errors).toHaveLength(1);
    expect(consumer.state).toBe('running');
    await consumer.stop();
  });

  it('marks a FAILED record dead-lettered once its copy is confirmed: a redelivery is acked without another copy', async () => {
    const { channel, confirm, store, consumer } = await setup(() => {
      throw new NonRetryableError('bad');
    });
    channel.deliver('{}', { messageId: 'k' });
    await until('the ack', () => channel.acked.length === 1);
    expect((await store.get({ scope: 'work', key: 'k' }))?.deadLettered).toBe(true);
    channel.deliver('{}', { messageId: 'k' }, true);
    await until('the second ack', () => channel.acked.length === 2);
    expect(confirm.published).toHaveLength(1);
    await consumer.stop();
  });

  it('reconnects single-flight: a close while the reconnect consumes makes the same loop go on', async () => {
    const { channel, connection, consumer } = await setup(() => 'ok', {
      reconnectBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' },
    });
    const original = connection.createChannel.bind(connection);
    let opened = 0;
    connection.createChannel = async () => {
      const next = (await original()) as unknown as FakeChannel;
      if (next.journal !== channel.journal) return next as never; // a topology scratch channel
      opened += 1;
      if (opened === 1) {
        // The second consume channel (the first reconnect's) closes while it is being consumed on.
        const consume = next.consume.bind(next);
        next.consume = async (...args) => {
          const reply = await consume(...args);
          next.emit('close');
          return reply;
        };
      }
      return next as never;
    };
    const reconnected: number[] = [];
    consumer.on('reconnected', (e) => reconnected.push(e.attempts));
    channel.emit('close');
    await until('consuming again', () => reconnected.length > 0 && consumer.state === 'running');
    await sleep(50);
    expect(reconnected).toEqual([2]);
    expect(consumer.reconnecting).toBe(false);
    await consumer.stop();
  });

  /**
   * After `k`'s first delivery was requeued with its written claim left to the consumer: waits until the
   * consumer resumed and the claim was given back (RELEASED, no attempt spent), then redelivers `k` and
   * waits for its ack. Bounded, then asserted: before the fix the claim stayed IN_PROGRESS until its lease
   * lapsed.
   */
  async function givenBackThenRedelivered({ channel, store, consumer }: Awaited<ReturnType<typeof setup>>) {
    await until('the consumer resumed', () => consumer.state === 'running');
    const id = { scope: 'work', key: 'k' };
    let record = await store.get(id);
    for (const deadline = Date.now() + 2000; record?.state !== 'RELEASED' && Date.now() < deadline; ) {
      await sleep(2);
      record = await store.get(id);
    }
    expect(record).toMatchObject({ state: 'RELEASED', attempt: 0 });
    channel.deliver('{}', { messageId: 'k' }, true);
    await until('the ack', () => channel.acked.length === 1);
    expect(await store.get(id)).toMatchObject({ state: 'COMPLETED', attempt: 1 });
  }

  /**
   * Another worker holds `k`; it gives it up unrun as a delivery's `conflictWaitMs` wait begins, and the
   * wait's claim takes it: applied, then its `WAIT` goes unanswered (`run` rejects naming it when the
   * runner's own give-back goes unanswered too), and the store is down from then on (`store.down`).
   */
  async function heldThenClaimedByTheWait(store: RecordingStore) {
    const id = { scope: 'work', key: 'k' };
    const holder = await store.claim(id, { leaseMs: 60_000, retentionMs: 60_000, reserve: true });
    if (holder.outcome !== 'ACQUIRED') throw new Error(holder.outcome);
    const unrun = { retentionMs: 60_000, neverStarted: true };
    nextClaimWrittenThenUnanswered(store, 'waitForOutcome', {
      before: () => store.release(id, holder.fencingToken, unrun),
      written: () => {
        store.down = true;
      },
    });
  }

  it('a claim the store wrote before it failed, whose give-back went unanswered too (writtenClaim), is given back once the store answers: the requeued delivery runs at once, as attempt 1 (it met the claim as a CONFLICT until its lease lapsed)', async () => {
    const attempts: number[] = [];
    const fixture = await setup(({ attempt }) => {
      attempts.push(attempt);
      return 'ok';
    });
    const { channel, store, consumer } = fixture;
    // As RedisIdempotencyStore with waitForReplicas whose WAIT (or start) goes unanswered: the claim is
    // applied, counted, and the call rejects naming it; the store is down from then on (the runner's own
    // give-back goes unanswered too) until the consumer pauses.
    nextClaimWrittenThenUnanswered(store, 'claim', {
      written: () => {
        store.down = true;
      },
    });
    consumer.once('storeUnavailable', () => {
      store.down = false;
    });
    channel.deliver('{}', { messageId: 'k' });
    await until('the requeue', () => channel.nacked.length === 1);
    await givenBackThenRedelivered(fixture);
    expect(attempts).toEqual([1]);
    await consumer.stop();
  });

  it('a claim of a CONFLICT wait, written once the holder let go, whose WAIT and give-back went unanswered (run rejects naming it), is given back once the store answers: nothing is acked before the handler ran, and the requeued delivery runs once, as attempt 1 (run resolved CONFLICT: the delivery was acked to a delay tier and the claim held the key until its lease lapsed)', async () => {
    const handled: number[] = [];
    let journal: Journal = [];
    const fixture = await setup(
      ({ attempt }) => {
        handled.push(attempt);
        journal.push(`handler:${attempt}`);
        return 'ok';
      },
      { conflictWaitMs: 1000 },
    );
    const { channel, store, consumer } = fixture;
    journal = fixture.journal;
    // The store is down from the wait's claim on (the runner's own give-back goes unanswered too) until
    // the consumer pauses.
    await heldThenClaimedByTheWait(store);
    consumer.once('storeUnavailable', () => {
      store.down = false;
    });
    channel.deliver('{}', { messageId: 'k' });
    await until('the delivery settled', () => channel.nacked.length + channel.acked.length > 0);
    expect(channel.acked).toEqual([]);
    expect(channel.nacked).toEqual([{ tag: 1, requeue: true }]);
    await givenBackThenRedelivered(fixture);
    expect(handled).toEqual([1]);
    expect(journal.filter((j) => /^(handler|ack|publish)/.test(j))).toEqual(['handler:1', 'ack:2']);
    await consumer.stop();
  });

  it('storeFailureMode open: a claim of a CONFLICT wait whose WAIT and give-back went unanswered (run rejects naming it) is given back by the consumer: the delivery is requeued, the claim is RELEASED with no attempt spent, and the redelivery runs once, as attempt 1 (the claim held the key until its lease lapsed)', async () => {
    const handled: number[] = [];
    const fixture = await setup(
      ({ attempt }) => {
        handled.push(attempt);
        return 'ok';
      },
      { conflictWaitMs: 1000 },
      { storeFailureMode: 'open' },
    );
    const { channel, store, idempotency, consumer } = fixture;
    await heldThenClaimedByTheWait(store);
    // The runner's own give-back goes unanswered (its storeError); the store answers again from then on.
    idempotency.on('storeError', ({ operation }) => {
      if (operation === 'release') store.down = false;
    });
    const storeErrors: string[] = [];
    consumer.on('storeError', (e) => storeErrors.push(e.operation));
    channel.deliver('{}', { messageId: 'k' });
    await until('the delivery settled', () => channel.nacked.length + channel.acked.length > 0);
    // Requeued (after the shortest delay tier when there is one): nothing acked before the handler ran.
    expect(channel.acked).toEqual([]);
    expect(channel.nacked).toEqual([{ tag: 1, requeue: true }]);
    await givenBackThenRedelivered(fixture);
    expect(handled).toEqual([1]);
    expect(storeErrors).toEqual([]);
    await consumer.stop();
  });
});

describe('IdempotentConsumer pausing while basic.consume is in flight', () => {
  /**
   * A consumer whose first delivery's claim hangs (Redis does not answer) until `failClaim()`, and whose
   * reconnect's `basic.consume` is held until `answerConsume()`: the store outage lands between the
   * reconnect's `basic.consume` and its `consume-ok`.
   */
  async function pausedDuringConsume() {
    const fixture = await setup(() => 'ok', {
      reconnectBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' },
    });
    const { channel, connection, store } = fixture;
    let failClaim: (() => void) | undefined;
    jest.spyOn(store, 'claim').mockImplementationOnce(
      () =>
        new Promise((_, reject) => {
          failClaim = () => reject(new StoreUnavailableError('the claim timed out'));
        }),
    );
    let answerConsume: () => void = () => {};
    const consumeAnswered = new Promise<void>((resolve) => (answerConsume = resolve));
    let consumeAsked = false;
    const original = connection.createChannel.bind(connection);
    let fresh: FakeChannel | undefined;
    connection.createChannel = async () => {
      const next = (await original()) as unknown as FakeChannel;
      if (next.journal !== channel.journal || fresh) return next as never; // a topology scratch channel
      fresh = next;
      const consume = next.consume.bind(next);
      next.consume = async (...args) => {
        consumeAsked = true;
        await consumeAnswered;
        return consume(...args);
      };
      return next as never;
    };
    channel.deliver('{}', { messageId: 'claim-hangs' });
    await until('the claim to be sent', () => failClaim !== undefined);
    const reconnected = new Promise((resolve) => fixture.consumer.once('reconnected', resolve));
    channel.emit('close');
    await until('the reconnect to send basic.consume', () => consumeAsked);
    return { ...fixture, fresh: () => fresh!, failClaim: failClaim!, answerConsume, reconnected };
  }

  it('a store outage while the reconnect consumes leaves no consumer on the broker until the store answers, then exactly one', async () => {
    const f = await pausedDuringConsume();
    const recovered = new Promise((resolve) => f.consumer.once('storeRecovered', resolve));
    f.store.down = true; // the probes fail until the test says otherwise
    f.failClaim();
    await until('paused', () => f.consumer.state === 'paused');
    f.answerConsume();
    await f.reconnected;
    const fresh = f.fresh();
    // Paused: the consumer the reconnect registered is cancelled (else every delivery is nacked and
    // redelivered at once, a hot loop, for as long as the store is down).
    expect(fresh.consumes).toBe(1);
    expect(fresh.cancels).toBe(1);
    expect(f.consumer.state).toBe('paused');
    f.store.down = false;
    await recovered;
    await until('running', () => f.consumer.state === 'running');
    await until('consuming again', () => fresh.consumes === 2);
    expect(fresh.consumes - fresh.cancels).toBe(1);
    fresh.deliver('{}', { messageId: 'after' });
    await until('ack', () => fresh.acked.length === 1);
    await f.consumer.stop();
    expect(fresh.consumes - fresh.cancels).toBe(0);
  });

  it('a store that answers again before the paused basic.consume does leaves exactly one consumer', async () => {
    const f = await pausedDuringConsume();
    const recovered = new Promise((resolve) => f.consumer.once('storeRecovered', resolve));
    f.failClaim();
    await recovered; // the probe answered while basic.consume is still in flight
    f.answerConsume();
    await f.reconnected;
    const fresh = f.fresh();
    // The resume consumes again once the reconnect's basic.consume is answered (and cancelled, as the
    // consumer was paused then): one consumer, not two.
    await until('the resume to consume', () => fresh.consumes === 2);
    expect(f.consumer.state).toBe('running');
    expect(fresh.consumes - fresh.cancels).toBe(1);
    await f.consumer.stop();
    expect(fresh.consumes - fresh.cancels).toBe(0);
  });

  it('stop() while the reconnect consumes cancels that consumer before it waits for the deliveries in flight', async () => {
    const f = await pausedDuringConsume();
    // The delivery whose claim hangs keeps stop() waiting; meanwhile the reconnect's consumer must not
    // stay registered (each of its deliveries would be nacked and redelivered at once until stop() ends).
    const stopped = f.consumer.stop();
    expect(f.consumer.state).toBe('stopping');
    f.answerConsume();
    const fresh = f.fresh();
    await until('the consumer cancelled while stop() waits', () => fresh.cancels === 1);
    expect(f.consumer.inFlight).toBe(1);
    f.failClaim();
    await stopped;
    expect(fresh.consumes - fresh.cancels).toBe(0);
  });

  it('stop() while the resume after an outage consumes cancels that consumer before it waits for the deliveries in flight', async () => {
    let release: () => void = () => {};
    let runs = 0;
    const { channel, store, consumer } = await setup(() => {
      runs += 1;
      return new Promise<void>((r) => (release = r));
    });
    channel.deliver('{}', { messageId: 'slow' }); // in flight until release(): keeps stop() waiting
    await until('the handler to start', () => runs === 1);
    // The resume's basic.consume is held until the test answers it.
    let answerConsume: () => void = () => {};
    const consumeAnswered = new Promise<void>((resolve) => (answerConsume = resolve));
    let consumeAsked = false;
    const consume = channel.consume.bind(channel);
    channel.consume = async (...args) => {
      consumeAsked = true;
      await consumeAnswered;
      return consume(...args);
    };
    jest.spyOn(store, 'claim').mockRejectedValueOnce(new StoreUnavailableError('store is down'));
    channel.deliver('{}', { messageId: 'outage' });
    // Paused (a cancel), then the probe answered: the resume sends basic.consume.
    await until('the resume to send basic.consume', () => consumeAsked);
    expect(channel.cancels).toBe(1);
    expect(consumer.state).toBe('running');
    const stopped = consumer.stop();
    answerConsume();
    await until('the consumer cancelled while stop() waits', () => channel.cancels === 2);
    expect(consumer.inFlight).toBe(1);
    release();
    await stopped;
    expect(channel.consumes - channel.cancels).toBe(0);
  });
});

describe('IdempotentConsumer: a handler that completed whose COMPLETED write the store did not answer (recorded: false)', () => {
  it('acks it once; once the store answers the record is COMPLETED, and a redelivery of the key is a DUPLICATE (the handler ran once)', async () => {
    const fake = fakeConnection();
    const store = new RecordingStore(fake.journal);
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 10_000, writeAttempts: 1 });
    const written = new Promise<'written' | 'not written'>((resolve) => {
      idempotency.on('completed', (e) => {
        if (e.recorded) resolve('written');
      });
      setTimeout(resolve, 3_000, 'not written').unref();
    });
    let runs = 0;
    const consumer = createIdempotentConsumer(
      { idempotency, connection: fake.connection, logger: false },
      { queue: 'work', ...FAST },
      () => {
        runs += 1;
        store.down = true; // Redis stops answering as the handler returns
        return 'done';
      },
    );
    const settled: string[] = [];
    consumer.on('settled', (e) => settled.push(`${e.outcome} ${e.decision.action}`));
    await consumer.start();
    const { channel } = fake;
    try {
      channel.deliver('{}', { messageId: 'k' });
      await until('the ack', () => channel.acked.length === 1);
      // Redis answers again, well within the claim's lease.
      store.down = false;
      expect(await written).toBe('written');
      const id = { scope: 'work', key: 'k' };
      expect(await store.get(id)).toMatchObject({ state: 'COMPLETED' });
      await until('the consumer consuming', () => consumer.state === 'running');
      // The same key again (a producer's second send, a redelivery after a channel loss).
      channel.deliver('{}', { messageId: 'k' }, true);
      await until('the second ack', () => channel.acked.length === 2);
      expect(settled).toEqual(['ACQUIRED ack', 'DUPLICATE ack']);
      expect(channel.nacked).toEqual([]);
      expect(runs).toBe(1);
    } finally {
      store.down = false;
      await consumer.stop();
    }
  });
});
