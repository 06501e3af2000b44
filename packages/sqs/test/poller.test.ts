import type { Message } from '@aws-sdk/client-sqs';
import {
  Idempotency,
  type IdempotencyStore,
  InvalidOptionError,
  MemoryIdempotencyStore,
  NonRetryableError,
  StoreUnavailableError,
  TopologyMismatchError,
} from '@idempotent-consumer/core';
import { DEAD_LETTER_FIELDS } from '@idempotent-consumer/core/kit';
import {
  createSqsConsumerWiring,
  DEAD_LETTER_ATTRIBUTES,
  IdempotentSqsPoller,
  type SqsIdempotencyEvents,
  type SqsPollerOptions,
} from '@idempotent-consumer/sqs';

type Settled = SqsIdempotencyEvents['settled'][0];

import { nextClaimWrittenThenUnanswered } from '../../../integration-tests/support/written-claim';
import { SqsMessagePort } from '../src/message-port';
import { FakeSqs, message } from './fake-sqs';

const QUEUE = 'https://sqs.us-east-1.amazonaws.com/000000000000/orders';

async function until(what: string, check: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function setup(store: IdempotencyStore = new MemoryIdempotencyStore(), maxAttempts = 5) {
  const sqs = new FakeSqs();
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 3000, maxAttempts });
  return { sqs, idempotency };
}

describe('IdempotentSqsPoller (fake SQS, memory store)', () => {
  it('sets the retry visibility from ApproximateReceiveCount', async () => {
    const { sqs, idempotency } = setup();
    const m = message('x', { key: 'k', receiveCount: 3 });
    sqs.batches.push([m]);
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, retryBackoff: { baseMs: 1000, factor: 2, jitter: 'none' } },
      () => {
        throw new Error('transient');
      },
    );
    poller.start();
    await until('a visibility change', () => sqs.visibility.length === 1);
    await poller.stop();
    // computeBackoffMs(3) = 1000 * 2^2 = 4000 ms -> 4 s
    expect(sqs.visibility).toEqual([{ receipt: m.ReceiptHandle, seconds: 4 }]);
    expect(sqs.deleted).toEqual([]);
    expect(await idempotency.store.get({ scope: 'orders', key: 'k' })).toMatchObject({ state: 'RELEASED' });
  });

  it('runs a FIFO group in order and stops the group at the first message that does not finish', async () => {
    const { sqs, idempotency } = setup();
    const g1 = [1, 2, 3].map((i) => message(`g1-${i}`, { key: `g1-${i}`, group: 'g1' }));
    const g2 = [1, 2].map((i) => message(`g2-${i}`, { key: `g2-${i}`, group: 'g2' }));
    sqs.batches.push([g1[0]!, g2[0]!, g1[1]!, g2[1]!, g1[2]!]);
    const ran: string[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: `${QUEUE}.fifo`, waitTimeSeconds: 0, retryBackoff: { baseMs: 0 } },
      async ({ message: m }) => {
        ran.push(m.Body!);
        await new Promise((r) => setTimeout(r, 5));
        if (m.Body === 'g1-2') throw new Error('transient');
      },
    );
    const processed: Settled[] = [];
    poller.on('settled', (p) => processed.push(p));
    poller.start();
    await until('5 processed', () => processed.length === 5);
    await poller.stop();
    expect(ran.filter((b) => b.startsWith('g1'))).toEqual(['g1-1', 'g1-2']);
    expect(ran.filter((b) => b.startsWith('g2'))).toEqual(['g2-1', 'g2-2']);
    const third = processed.find((p) => p.message === g1[2])!;
    expect(third.decision).toEqual({
      action: 'change-visibility',
      reason: 'fifo-blocked',
      visibilityTimeoutSeconds: 0,
    });
    expect(sqs.deleted.sort()).toEqual([g1[0]!, g2[0]!, g2[1]!].map((m) => m.ReceiptHandle).sort());
  });

  it("an event carries the subject's fields and its own, as in Kafka and RabbitMQ: not the processor's internals", async () => {
    const { sqs, idempotency } = setup();
    const m = message('x', { key: 'k' });
    sqs.batches.push([m]);
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0 },
      () => 'ok',
    );
    const settled: Settled[] = [];
    poller.on('settled', (e) => settled.push(e));
    poller.start();
    await until('settled', () => settled.length === 1);
    await poller.stop();
    expect(Object.keys(settled[0]!).sort()).toEqual(
      ['attempt', 'decision', 'key', 'message', 'outcome', 'scope', 'source'].sort(),
    );
  });

  it('claims a received batch in one claimMany call, attempts counted at once: no start call per message', async () => {
    const store = new MemoryIdempotencyStore();
    const { sqs, idempotency } = setup(store);
    const spy = jest.spyOn(idempotency, 'claimMany');
    const claim = jest.spyOn(idempotency, 'claim');
    const start = jest.spyOn(store, 'start');
    sqs.batches.push([message('a', { key: 'a' }), message('b', { key: 'b' }), message('a', { key: 'a' })]);
    const processed: Settled[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0 },
      () => 'ok',
    );
    poller.on('settled', (p) => processed.push(p));
    poller.start();
    await until('3 processed', () => processed.length === 3);
    await poller.stop();
    expect(spy).toHaveBeenCalledTimes(1);
    expect(spy.mock.calls[0]![1]).toMatchObject({ reserve: false });
    expect(claim).not.toHaveBeenCalled();
    // Only the CONFLICT wait's claim is a reservation (a visibility change comes before its handler).
    expect(start).toHaveBeenCalledTimes(0);
    expect(await store.get({ scope: 'orders', key: 'b' })).toMatchObject({ state: 'COMPLETED', attempt: 1 });
    // The second `a` met the first one's claim (CONFLICT), waited for its outcome and settled as DUPLICATE.
    expect(processed.map((p) => p.outcome).sort()).toEqual(['ACQUIRED', 'ACQUIRED', 'DUPLICATE']);
  });

  it('a visibility timeout the first heartbeat could outlast: the batch is claimed as reservations, counted when each handler starts (after its visibility is extended)', async () => {
    const store = new MemoryIdempotencyStore();
    const { sqs, idempotency } = setup(store);
    const claimMany = jest.spyOn(idempotency, 'claimMany');
    const start = jest.spyOn(store, 'start');
    const processed: Settled[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, visibilityTimeoutSeconds: 1 },
      () => 'ok',
    );
    poller.on('settled', (p) => processed.push(p));
    sqs.batches.push([message('a', { key: 'a' })]);
    poller.start();
    await until('processed', () => processed.length === 1);
    await poller.stop();
    // A crash during the visibility change before the handler must not spend an attempt.
    expect(claimMany.mock.calls[0]![1]).toMatchObject({ reserve: true });
    expect(start).toHaveBeenCalledTimes(1);
    expect(await store.get({ scope: 'orders', key: 'a' })).toMatchObject({ state: 'COMPLETED', attempt: 1 });
  });

  it('deletes nothing and pauses polling while the store is unavailable, then resumes', async () => {
    const memory = new MemoryIdempotencyStore();
    let down = false; // start() pings the store: it answers, then goes down
    const flaky: IdempotencyStore = new Proxy(memory, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) =>
          down ? Promise.reject(new StoreUnavailableError('down')) : value.apply(target, args);
      },
    });
    const { sqs, idempotency } = setup(flaky);
    const m = message('x', { key: 'k' });
    sqs.batches.push([m]);
    const events: string[] = [];
    let runs = 0;
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, storeProbeBackoff: { baseMs: 10, maxMs: 10 } },
      () => {
        runs += 1;
      },
    );
    poller.on('storeUnavailable', () => events.push('down'));
    poller.on('storeRecovered', () => events.push('up'));
    const started = poller.start();
    down = true;
    await started;
    await until('paused', () => poller.paused);
    const receives = sqs.receives;
    await new Promise((r) => setTimeout(r, 100));
    expect(sqs.receives).toBe(receives); // no polling while paused
    expect(sqs.deleted).toEqual([]);
    expect(sqs.visibility).toEqual([]); // left invisible
    expect(runs).toBe(0);
    sqs.batches.push([m]); // SQS shows it again after its visibility timeout
    down = false;
    await until('deleted after recovery', () => sqs.deleted.length === 1);
    await poller.stop();
    expect(events).toEqual(['down', 'up']);
    expect(runs).toBe(1);
  });

  it('dead-letters a missing key by default, and reports failed batch entries as brokerError', async () => {
    const { sqs, idempotency } = setup();
    const noKey = message('x');
    delete (noKey as { MessageId?: string }).MessageId;
    sqs.failReceipts.add(noKey.ReceiptHandle!);
    sqs.batches.push([noKey]);
    const errors: unknown[] = [];
    const dead: SqsIdempotencyEvents['deadLettered'][0][] = [];
    const missing: SqsIdempotencyEvents['missingKey'][0][] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, deadLetter: { queueUrl: `${QUEUE}-dlq` } },
      () => 'never',
    );
    poller.on('brokerError', (e) => errors.push(e.error));
    poller.on('deadLettered', (p) => dead.push(p));
    poller.on('missingKey', (p) => missing.push(p));
    poller.start();
    await until('a brokerError', () => errors.length === 1);
    await poller.stop();
    expect(dead[0]).toMatchObject({ reason: 'missing-key', via: 'copy', destination: `${QUEUE}-dlq` });
    expect(missing[0]).toMatchObject({ action: 'dead-letter', key: undefined });
    expect(sqs.sent[0]).toMatchObject({ queueUrl: `${QUEUE}-dlq`, body: 'x' });
    const text = (value: string) => ({ DataType: 'String', StringValue: value });
    expect(sqs.sent[0]!.attributes).toEqual({
      'x-idempotency-dead-letter-reason': text('missing-key'),
      'x-idempotency-error': expect.objectContaining({
        StringValue: expect.stringContaining('MissingKeyError'),
      }),
      'x-idempotency-outcome': text('NONE'),
      'x-idempotency-attempt': text('0'),
      'x-idempotency-scope': text('orders'),
    });
    const { reason, outcome, error, attempt, key, scope } = DEAD_LETTER_ATTRIBUTES;
    expect({ reason, outcome, error, attempt, key, scope }).toEqual(DEAD_LETTER_FIELDS);
    expect(errors[0]).toMatchObject({ code: 'SQS_OPERATION_FAILED', sqsCode: 'ReceiptHandleIsInvalid' });
  });

  it('rejects bad options with InvalidOptionError', () => {
    const { sqs, idempotency } = setup();
    const deps = { idempotency, sqs: sqs.client, logger: false as const };
    expect(() => new IdempotentSqsPoller(deps, { queueUrl: '' }, () => 1)).toThrow(InvalidOptionError);
    expect(() => new IdempotentSqsPoller(deps, { queueUrl: QUEUE, waitTimeSeconds: 21 }, () => 1)).toThrow(
      InvalidOptionError,
    );
    expect(() => new IdempotentSqsPoller(deps, { queueUrl: QUEUE, concurrency: 0 }, () => 1)).toThrow(
      InvalidOptionError,
    );
    expect(
      () => new IdempotentSqsPoller(deps, { queueUrl: QUEUE, deadLetter: { queueUrl: '' } }, () => 1),
    ).toThrow(InvalidOptionError);
  });

  it("refuses to start with TopologyMismatchError when deadLetter is 'redrive-policy' and the queue has none", async () => {
    const { sqs, idempotency } = setup();
    sqs.redrivePolicy = undefined;
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE },
      () => 1,
    );
    await expect(poller.start()).rejects.toBeInstanceOf(TopologyMismatchError);
    expect(poller.running).toBe(false);
    expect(sqs.receives).toBe(0);
    sqs.redrivePolicy = '{"deadLetterTargetArn":"arn:dlq"}';
    await expect(poller.start()).rejects.toMatchObject({ code: 'TOPOLOGY_MISMATCH' });
  });
});

describe('IdempotentSqsPoller failure paths', () => {
  const DLQ = 'https://sqs.us-east-1.amazonaws.com/000000000000/orders-dlq';

  it('an unprotected run whose dead-letter copy fails is not run again: the next receive sends the copy', async () => {
    const { sqs, idempotency } = setup();
    sqs.failSends = 1;
    const m = message('x');
    sqs.batches.push([m]);
    let runs = 0;
    const keys: unknown[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      {
        queueUrl: QUEUE,
        waitTimeSeconds: 0,
        idempotencyKey: () => undefined,
        missingKey: 'process',
        deadLetter: { queueUrl: DLQ },
      },
      ({ key }) => {
        runs += 1;
        keys.push(key);
        throw new NonRetryableError('bad');
      },
    );
    const settled: string[] = [];
    poller.on('settled', (e) => settled.push(`${e.decision.action}:${e.decision.reason}`));
    await poller.start();
    await until('the failed copy', () => settled.length === 1);
    sqs.batches.push([{ ...m, Attributes: { ApproximateReceiveCount: '2' } }]); // back after its visibility
    await until('the copy', () => sqs.sent.length === 1);
    await until('the delete', () => sqs.deleted.length === 1);
    await poller.stop();
    expect(runs).toBe(1);
    expect(keys).toEqual([undefined]);
    expect(settled).toEqual(['leave:dead-letter-failed', 'dead-letter:non-retryable']);
  });

  it('a fail-open run whose dead-letter copy failed gives back the batch claim of its next receive (no attempt spent, not left IN_PROGRESS)', async () => {
    const store = new MemoryIdempotencyStore();
    const sqs = new FakeSqs();
    const idempotency = new Idempotency(
      { store, logger: false },
      { leaseMs: 3000, maxAttempts: 5, storeFailureMode: 'open' },
    );
    let down = true;
    const unavailable = () => Promise.reject(new StoreUnavailableError('down'));
    const claimMany = store.claimMany.bind(store);
    const claim = store.claim.bind(store);
    jest.spyOn(store, 'claimMany').mockImplementation((r) => (down ? unavailable() : claimMany(r)));
    jest.spyOn(store, 'claim').mockImplementation((id, o) => (down ? unavailable() : claim(id, o)));
    sqs.failSends = 1;
    const m = message('x', { key: 'k' });
    sqs.batches.push([m]);
    let runs = 0;
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, deadLetter: { queueUrl: DLQ } },
      () => {
        runs += 1;
        throw new NonRetryableError('bad');
      },
    );
    const settled: string[] = [];
    poller.on('settled', (e) => settled.push(`${e.decision.action}:${e.decision.reason}`));
    await poller.start();
    await until('the failed copy', () => settled.length === 1);
    down = false; // the store answers again; the message comes back after its visibility timeout
    sqs.batches.push([{ ...m, ReceiptHandle: 'r-again', Attributes: { ApproximateReceiveCount: '2' } }]);
    await until('the copy and the delete', () => settled.length === 2);
    await poller.stop();
    expect(runs).toBe(1);
    expect(settled).toEqual(['leave:dead-letter-failed', 'dead-letter:non-retryable']);
    expect(sqs.deleted).toEqual(['r-again']);
    // The batch claim of the second receive ran no handler: it is given back, costing no attempt.
    expect(await store.get({ scope: 'orders', key: 'k' })).toMatchObject({ state: 'RELEASED', attempt: 0 });
  });

  it("an unprotected handler's signal aborts when the poller stops", async () => {
    const { sqs, idempotency } = setup();
    sqs.batches.push([message('x')]);
    let started = false;
    let aborted = false;
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      {
        queueUrl: QUEUE,
        waitTimeSeconds: 0,
        idempotencyKey: () => undefined,
        missingKey: 'process',
        deadLetter: { queueUrl: DLQ },
      },
      async ({ signal }) => {
        started = true;
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        aborted = true;
      },
    );
    await poller.start();
    await until('the handler started', () => started);
    await poller.stop();
    expect(aborted).toBe(true);
  });

  it('a message without a key received more than maxAttempts times is dead-lettered without running', async () => {
    const { sqs, idempotency } = setup(new MemoryIdempotencyStore(), 3);
    sqs.batches.push([message('x', { receiveCount: 4 })]);
    let runs = 0;
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      {
        queueUrl: QUEUE,
        waitTimeSeconds: 0,
        idempotencyKey: () => undefined,
        missingKey: 'process',
        deadLetter: { queueUrl: DLQ },
      },
      () => {
        runs += 1;
      },
    );
    await poller.start();
    await until('the delete', () => sqs.deleted.length === 1);
    await poller.stop();
    expect(runs).toBe(0);
    expect(sqs.sent[0]!.attributes['x-idempotency-dead-letter-reason']).toMatchObject({
      StringValue: 'attempts-exhausted',
    });
  });

  it('marks a FAILED record dead-lettered after its copy: a redelivery is deleted without a second copy', async () => {
    const { sqs, idempotency } = setup();
    const m = message('x', { key: 'k' });
    sqs.batches.push([m]);
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, deadLetter: { queueUrl: DLQ } },
      () => {
        throw new NonRetryableError('bad');
      },
    );
    const settled: string[] = [];
    poller.on('settled', (e) => settled.push(`${e.decision.action}:${e.decision.reason}`));
    await poller.start();
    await until('the first delete', () => sqs.deleted.length === 1);
    expect(await idempotency.store.get({ scope: 'orders', key: 'k' })).toMatchObject({ deadLettered: true });
    sqs.batches.push([{ ...m, ReceiptHandle: 'r-again' }]); // a duplicate delivery of the same message
    await until('the second delete', () => sqs.deleted.length === 2);
    await poller.stop();
    expect(sqs.sent).toHaveLength(1);
    expect(settled).toEqual(['dead-letter:non-retryable', 'delete:dead-lettered-before']);
  });

  it('a message abandoned by stop() whose handler then fails sends nothing to SQS: no dead-letter copy, its record left FAILED for the redelivery', async () => {
    const { sqs, idempotency } = setup();
    const m = message('x', { key: 'k' });
    sqs.batches.push([m]);
    // process() resolves once the message's decision is carried out: the point after which nothing more is sent.
    const process = jest.spyOn(SqsMessagePort.prototype, 'process');
    let fail: (() => void) | undefined;
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, stopTimeoutMs: 50, deadLetter: { queueUrl: DLQ } },
      () =>
        new Promise((_, reject) => {
          fail = () => reject(new NonRetryableError('declined'));
        }),
    );
    const settled: string[] = [];
    poller.on('settled', (e) => settled.push(`${e.decision.action}:${e.decision.reason}`));
    await poller.start();
    await until('the handler to run', () => fail !== undefined);
    await expect(poller.stop()).resolves.toEqual({ abandoned: 1 });
    const visibilityChanges = sqs.visibility.length;
    fail!();
    await processed(process);
    expect(sqs.sent).toEqual([]);
    expect(sqs.deleted).toEqual([]);
    expect(sqs.visibility).toHaveLength(visibilityChanges);
    expect(settled).toEqual(['leave:abandoned']);
    const record = await idempotency.store.get({ scope: 'orders', key: 'k' });
    expect(record).toMatchObject({ state: 'FAILED' });
    expect(record?.deadLettered).toBeFalsy();

    // Nothing is lost: back after its visibility timeout, the FAILED record dead-letters it then.
    sqs.batches.push([{ ...m, ReceiptHandle: 'r-back', Attributes: { ApproximateReceiveCount: '2' } }]);
    await poller.start();
    await until('the delete', () => sqs.deleted.length === 1);
    await poller.stop();
    expect(sqs.sent).toHaveLength(1);
    expect(sqs.deleted).toEqual(['r-back']);
  });

  it('the reservations of a batch claim answered after stop() abandoned the batch are released: the redelivery runs at once', async () => {
    const store = new MemoryIdempotencyStore();
    const { sqs, idempotency } = setup(store);
    let answerClaim!: () => void;
    const claimHeld = new Promise<void>((resolve) => (answerClaim = resolve));
    const claimMany = store.claimMany.bind(store);
    jest.spyOn(store, 'claimMany').mockImplementationOnce(async (...args) => {
      await claimHeld;
      return claimMany(...args);
    });
    const released: string[] = [];
    const release = store.release.bind(store);
    jest.spyOn(store, 'release').mockImplementation(async (id, ...rest) => {
      const reply = await release(id, ...rest);
      if (reply.ok) released.push(id.key);
      return reply;
    });
    const ran: string[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, stopTimeoutMs: 50 },
      ({ key }) => {
        ran.push(key!);
      },
    );
    const [a, b] = [message('a', { key: 'a' }), message('b', { key: 'b' })];
    sqs.batches.push([a, b]);
    await poller.start();
    await until('the batch claim to be sent', () => (store.claimMany as jest.Mock).mock.calls.length === 1);
    await expect(poller.stop()).resolves.toEqual({ abandoned: 2 });
    answerClaim();
    await until('both reservations released', () => released.length === 2);
    expect(released.sort()).toEqual(['a', 'b']);
    expect(ran).toEqual([]);
    expect(await store.get({ scope: 'orders', key: 'a' })).toMatchObject({ state: 'RELEASED', attempt: 0 });

    // Back after their visibility timeout, well within the reservations' lease: run at once, no CONFLICT.
    const again = [a, b].map((m) => ({ ...m, ReceiptHandle: `${m.ReceiptHandle}-again` }));
    sqs.batches.push(again);
    await poller.start();
    await until('both deleted', () => sqs.deleted.length === 2);
    await poller.stop();
    expect(ran.sort()).toEqual(['a', 'b']);
  });

  it('a claim a CONFLICT wait ends with after stop() abandoned the message is released, and no handler starts', async () => {
    const store = new MemoryIdempotencyStore();
    const { sqs, idempotency } = setup(store);
    const held = await idempotency.claim({ scope: 'orders', key: 'k' });
    if (held.outcome !== 'ACQUIRED') throw new Error('the holder did not acquire');
    const wait = jest.spyOn(idempotency, 'waitForOutcome');
    const process = jest.spyOn(SqsMessagePort.prototype, 'process');
    const { poller, ran } = watchedPoller(idempotency, sqs, { conflictWaitMs: 10_000, stopTimeoutMs: 50 });
    sqs.batches.push([message('x', { key: 'k' })]);
    await poller.start();
    await until('the wait', () => wait.mock.calls.length === 1);
    // stop() ends the wait, but not a claim of it the store has not answered yet: from now on the store
    // answers the wait's claims only when the test says so.
    let answerClaim!: () => void;
    const claimHeld = new Promise<void>((resolve) => (answerClaim = resolve));
    const claim = store.claim.bind(store);
    const claimSpy = jest.spyOn(store, 'claim').mockImplementation(async (...args) => {
      await claimHeld;
      return claim(...args);
    });
    await idempotency.release({ scope: 'orders', key: 'k' }, held); // the holder gives up
    await until('a claim of the wait sent', () => claimSpy.mock.calls.length >= 1);
    await expect(poller.stop()).resolves.toEqual({ abandoned: 1 });
    answerClaim(); // the wait acquires, after stop() gave up on the message
    await processed(process);
    expect(ran).toEqual([]);
    await expectClaimGivenBack(idempotency, held, sqs);
  });

  it('a message stop() abandons while the visibility change after its CONFLICT wait is unanswered gives its claim back, and no handler starts', async () => {
    const { sqs, idempotency } = setup();
    const held = await idempotency.claim({ scope: 'orders', key: 'k' });
    if (held.outcome !== 'ACQUIRED') throw new Error('the holder did not acquire');
    const wait = jest.spyOn(idempotency, 'waitForOutcome');
    const process = jest.spyOn(SqsMessagePort.prototype, 'process');
    const { poller, ran, settled } = watchedPoller(idempotency, sqs, {
      conflictWaitMs: 10_000,
      stopTimeoutMs: 50,
    });
    sqs.batches.push([message('x', { key: 'k' })]);
    await poller.start();
    await until('the wait', () => wait.mock.calls.length === 1); // its visibility change was answered
    let answer!: () => void;
    sqs.holdVisibility = new Promise<void>((resolve) => (answer = resolve));
    // The holder gives up: the wait acquires, and the visibility change to the lease is not answered.
    await idempotency.release({ scope: 'orders', key: 'k' }, held);
    await until('the visibility change to the lease', () => sqs.heldVisibility === 1);
    await stopAbandoningUnrun({ poller, settled, ran }, answer, process);
    await expectClaimGivenBack(idempotency, held, sqs);
  });

  it('a batch reservation stop() abandons while the visibility change before its handler is unanswered is released, and no handler starts', async () => {
    const store = new MemoryIdempotencyStore();
    const { sqs, idempotency } = setup(store);
    const process = jest.spyOn(SqsMessagePort.prototype, 'process');
    // A visibility timeout of 1 s could lapse before the first heartbeat: it is extended before the handler.
    const { poller, ran, settled } = watchedPoller(idempotency, sqs, {
      visibilityTimeoutSeconds: 1,
      stopTimeoutMs: 50,
    });
    let answer!: () => void;
    sqs.holdVisibility = new Promise<void>((resolve) => (answer = resolve));
    sqs.batches.push([message('a', { key: 'a' })]);
    await poller.start();
    await until('the visibility change before the handler', () => sqs.heldVisibility === 1);
    await stopAbandoningUnrun({ poller, settled, ran }, answer, process);
    // The reservation is given back without an attempt spent: the redelivery runs at once.
    expect(await store.get({ scope: 'orders', key: 'a' })).toMatchObject({ state: 'RELEASED', attempt: 0 });
    expect(sqs.deleted).toEqual([]);
  });

  it('a FIFO message stop() abandons while its own claim is unanswered gives the claim back, and no handler starts', async () => {
    const store = new MemoryIdempotencyStore();
    const { sqs, idempotency } = setup(store);
    let answerClaim!: () => void;
    const claimHeld = new Promise<void>((resolve) => (answerClaim = resolve));
    const claim = store.claim.bind(store);
    // The batch claims the first message of the group; the second claims on its own, after the first.
    const claimSpy = jest.spyOn(store, 'claim').mockImplementationOnce(async (...args) => {
      await claimHeld;
      return claim(...args);
    });
    const { settled, ran } = await stopDuringSecondFifoClaim(idempotency, sqs, claimSpy, answerClaim);
    expect(settled).toEqual(['delete:completed', 'leave:abandoned']);
    expect(ran).toEqual(['a']);
    expect(await store.get({ scope: 'orders.fifo', key: 'b' })).toMatchObject({ state: 'RELEASED' });
  });

  it('a FIFO message stop() abandons while its claim meets a store that does not answer is not run unprotected (fail open)', async () => {
    const store = new MemoryIdempotencyStore();
    const sqs = new FakeSqs();
    const idempotency = new Idempotency(
      { store, logger: false },
      { leaseMs: 3000, storeFailureMode: 'open' },
    );
    let failClaim!: () => void;
    const claimHeld = new Promise<void>((resolve) => (failClaim = resolve));
    const claimSpy = jest.spyOn(store, 'claim').mockImplementationOnce(async () => {
      await claimHeld;
      throw new StoreUnavailableError('down');
    });
    const { settled, ran } = await stopDuringSecondFifoClaim(idempotency, sqs, claimSpy, failClaim);
    expect(settled).toEqual(['delete:completed', 'leave:abandoned']);
    expect(ran).toEqual(['a']);
  });

  it('a CONFLICT in a batch waits for the holder with reserve: true', async () => {
    const { sqs, idempotency } = setup();
    const held = await idempotency.claim({ scope: 'orders', key: 'k' });
    const wait = jest.spyOn(idempotency, 'waitForOutcome');
    sqs.batches.push([message('x', { key: 'k' })]);
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, conflictWaitMs: 50 },
      () => 1,
    );
    await poller.start();
    await until('the wait', () => wait.mock.calls.length === 1);
    await until('the conflict settled', () => sqs.visibility.length >= 2);
    await poller.stop();
    expect(wait.mock.calls[0]![1]).toMatchObject({ reserve: true });
    expect(held.outcome).toBe('ACQUIRED');
  });
});

describe('lease heartbeats and the final request', () => {
  it.each([
    ['the retry visibility change', 'threw', 1],
    ['the delete', 'completed', undefined],
  ] as const)(
    '%s of a message is sent only once its last heartbeat visibility change was answered',
    async (_what, ends, finalSeconds) => {
      const { sqs, idempotency } = setup();
      const m = message('x', { key: 'k' });
      sqs.batches.push([m]);
      let answer!: () => void;
      sqs.holdVisibility = new Promise<void>((resolve) => (answer = resolve));
      const poller = new IdempotentSqsPoller(
        { idempotency, sqs: sqs.client, logger: false },
        { queueUrl: QUEUE, waitTimeSeconds: 0, retryBackoff: { baseMs: 1000, jitter: 'none' } },
        async () => {
          // The first lease heartbeat (a third of the 3 s lease) sends its visibility change; SQS has not
          // answered it (a slow round trip) when the handler ends.
          await until('the heartbeat visibility change sent', () => sqs.heldVisibility === 1);
          sqs.holdVisibility = undefined;
          if (ends === 'threw') throw new Error('transient');
          return 1;
        },
      );
      const settled: string[] = [];
      poller.on('settled', (e) => settled.push(`${e.decision.action}:${e.decision.reason}`));
      const written = new Promise((resolve) => {
        idempotency.once('released', resolve);
        idempotency.once('completed', resolve);
      });
      await poller.start();
      await written;
      // The old code sends the final request at once (it then overlaps the unanswered heartbeat change);
      // the wait ends as soon as it does, else after a while (the final request waits for this answer).
      await until('a request overlapping the heartbeat change', () => sqs.overlapping.length > 0, 500).catch(
        () => {},
      );
      answer();
      await until('settled', () => settled.length === 1);
      await poller.stop();
      expect(sqs.overlapping).toEqual([]);
      if (finalSeconds === undefined) {
        expect(sqs.deleted).toEqual([m.ReceiptHandle]);
      } else {
        // The last visibility change that landed is the retry backoff, not the heartbeat's lease.
        expect(sqs.visibility.at(-1)).toEqual({ receipt: m.ReceiptHandle, seconds: finalSeconds });
      }
    },
  );
});

describe('IdempotentSqsPoller stop() and logging', () => {
  it('stop() is bounded when SQS never answers the final DeleteMessageBatch; the message is left to come back', async () => {
    const { sqs, idempotency } = setup();
    sqs.hangDeletes = true;
    sqs.batches.push([message('x', { key: 'k' })]);
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, stopTimeoutMs: 100 },
      async () => 'done',
    );
    let completed = false;
    idempotency.on('completed', () => {
      completed = true;
    });
    poller.start();
    await until('the handler completed', () => completed);
    // The message waits for its delete, which never comes: abandoned at stopTimeoutMs. The final drain of
    // that same delete is bounded too; without the bound stop() never resolves and the test times out.
    await expect(poller.stop()).resolves.toEqual({ abandoned: 1 });
    expect(sqs.deleted).toEqual([]);
    // The outcome is recorded: when the message becomes visible again it is a DUPLICATE, deleted unrun.
    expect(await idempotency.store.get({ scope: 'orders', key: 'k' })).toMatchObject({ state: 'COMPLETED' });
  }, 20_000);

  /**
   * A poller with `stopTimeoutMs: 50` whose one message completed and waits for its delete, which SQS holds:
   * `stop()` is called, and the delete is answered (`answer()`) when the test says.
   */
  async function stopWhileDeleteHeld() {
    const { sqs, idempotency } = setup();
    let answer!: () => void;
    sqs.holdDeletes = new Promise<void>((resolve) => (answer = resolve));
    const m = message('x', { key: 'k' });
    sqs.batches.push([m]);
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, stopTimeoutMs: 50 },
      async () => 'done',
    );
    const settled: string[] = [];
    poller.on('settled', (e) => settled.push(`${e.decision.action}:${e.decision.reason}`));
    const stoppedEvents: number[] = [];
    poller.on('stopped', (e) => stoppedEvents.push(e.abandoned));
    await poller.start();
    await until('the delete sent', () => sqs.heldDeletes === 1);
    // stop() sets its stopTimeoutMs timer in this call: a timer set after it, and longer, fires after it.
    const stopped = poller.stop();
    return { sqs, m, answer, settled, stoppedEvents, stopped };
  }

  it('a delete SQS answers after stopTimeoutMs, within the final flush, settles the message once: deleted, not abandoned', async () => {
    const { sqs, m, answer, settled, stoppedEvents, stopped } = await stopWhileDeleteHeld();
    await new Promise((resolve) => setTimeout(resolve, 60)); // past stopTimeoutMs, within the flush's 1 s
    answer();
    await expect(stopped).resolves.toEqual({ abandoned: 0 });
    expect(sqs.deleted).toEqual([m.ReceiptHandle]);
    expect(settled).toEqual(['delete:completed']);
    expect(stoppedEvents).toEqual([0]);
  });

  it('a delete SQS answers only after stop() gave up on it settles the message once: abandoned, as stop() resolved', async () => {
    const { sqs, m, answer, settled, stoppedEvents, stopped } = await stopWhileDeleteHeld();
    await expect(stopped).resolves.toEqual({ abandoned: 1 });
    expect(settled).toEqual(['leave:abandoned']);
    answer();
    await until('the late delete answered', () => sqs.deleted.length === 1);
    expect(sqs.deleted).toEqual([m.ReceiptHandle]);
    await new Promise(setImmediate); // every continuation of that answer has run (no I/O in between)
    expect(settled).toEqual(['leave:abandoned']);
    expect(stoppedEvents).toEqual([1]);
  }, 10_000);

  it('stop() during a start() whose dead-letter check SQS never answers ends the start and resolves', async () => {
    const { sqs, idempotency } = setup();
    sqs.hangQueueAttributes = true;
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, stopTimeoutMs: 100 },
      () => 1,
    );
    let started = false;
    poller.on('started', () => {
      started = true;
    });
    const starting = poller.start();
    await until('the dead-letter check sent', () => sqs.attributeRequests === 1);
    // Without the abort, stop() waits for that start for ever (SIGTERM never ends the process) and the
    // test times out.
    await expect(poller.stop()).resolves.toEqual({ abandoned: 0 });
    await expect(starting).resolves.toBe(poller);
    expect(sqs.attributeAborts).toBe(1); // the request was aborted, not left holding a socket
    expect(started).toBe(false);
    expect(poller.running).toBe(false);
    expect(sqs.receives).toBe(0);
  }, 10_000);

  it('stop() ends a CONFLICT wait in flight: the message settles as a CONFLICT, left to its visibility timeout, and stop() does not wait conflictWaitMs', async () => {
    const { sqs, idempotency } = setup();
    // Another worker holds the key for a minute: the wait could only end at its 30 s bound.
    const held = await idempotency.claim({ scope: 'orders', key: 'k' }, { leaseMs: 60_000 });
    if (held.outcome !== 'ACQUIRED') throw new Error('the holder did not acquire');
    const wait = jest.spyOn(idempotency, 'waitForOutcome');
    let runs = 0;
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, conflictWaitMs: 30_000, stopTimeoutMs: 60_000 },
      () => {
        runs += 1;
      },
    );
    const settled: Settled[] = [];
    poller.on('settled', (e) => settled.push(e));
    const m = message('x', { key: 'k' });
    sqs.batches.push([m]);
    await poller.start();
    await until('the wait', () => wait.mock.calls.length === 1);
    const stopping = poller.stop();
    // Far below the wait's 30 s bound: without the abort, stop() waits for the wait to end.
    let timer: NodeJS.Timeout | undefined;
    const stopped = await Promise.race([
      stopping,
      new Promise<'still waiting'>((resolve) => {
        timer = setTimeout(() => resolve('still waiting'), 5000);
      }),
    ]);
    clearTimeout(timer);
    if (stopped === 'still waiting') {
      await idempotency.release({ scope: 'orders', key: 'k' }, held); // ends the wait, so the poller stops
      await stopping;
    }
    expect(stopped).toEqual({ abandoned: 0 });
    expect(runs).toBe(0);
    expect(settled).toHaveLength(1);
    expect(settled[0]).toMatchObject({
      outcome: 'CONFLICT',
      decision: { action: 'change-visibility', reason: 'conflict', visibilityTimeoutSeconds: 5 },
    });
    // Nothing deleted: the visibility covering the wait, then the CONFLICT's (maxConflictDelayMs), sent by
    // the final flush; the message comes back then and meets the holder's record.
    expect(sqs.deleted).toEqual([]);
    expect(sqs.visibility).toEqual([
      { receipt: m.ReceiptHandle, seconds: 31 },
      { receipt: m.ReceiptHandle, seconds: 5 },
    ]);
    expect(await idempotency.store.get({ scope: 'orders', key: 'k' })).toMatchObject({
      state: 'IN_PROGRESS',
      fencingToken: held.fencingToken,
    });
  }, 20_000);

  it('attaches its logger to the runner from start() to stop(), once however many pollers share them', async () => {
    const { sqs, idempotency } = setup(); // the runner logs nowhere (logger: false)
    const lines: string[] = [];
    const logger = { warn: (m: string) => lines.push(m), error: (m: string) => lines.push(m) };
    const listeners = () => idempotency.listenerCount('leaseLost');
    const before = listeners();
    const pollers = [1, 2].map(
      () =>
        new IdempotentSqsPoller(
          { idempotency, sqs: sqs.client, logger },
          { queueUrl: QUEUE, waitTimeSeconds: 0 },
          async () => {},
        ),
    );
    expect(listeners()).toBe(before); // built, not started: nothing attached
    await Promise.all(pollers.map((p) => p.start()));
    expect(listeners()).toBe(before + 1);
    idempotency.emit('leaseLost', { scope: 's', key: 'k', fencingToken: 1, during: 'heartbeat' });
    expect(lines.filter((l) => l.includes('lease lost'))).toHaveLength(1);
    await pollers[0]!.stop();
    expect(listeners()).toBe(before + 1);
    await pollers[1]!.stop();
    expect(listeners()).toBe(before);
    // Started again: attached again.
    await pollers[0]!.start();
    expect(listeners()).toBe(before + 1);
    await pollers[0]!.stop();
    expect(listeners()).toBe(before);
  });

  it('the sqs-consumer wiring attaches its logger when built and detaches it on close()', () => {
    const { sqs, idempotency } = setup();
    const logger = { warn: () => {}, error: () => {} };
    const before = idempotency.listenerCount('leaseLost');
    const wiring = createSqsConsumerWiring(
      { idempotency, sqs: sqs.client, logger },
      { queueUrl: QUEUE },
      async () => {},
    );
    expect(idempotency.listenerCount('leaseLost')).toBe(before + 1);
    expect(Object.keys({ ...wiring })).not.toContain('close');
    wiring.close();
    wiring.close();
    expect(idempotency.listenerCount('leaseLost')).toBe(before);
  });

  it("the sqs-consumer wiring's close() aborts a dead-letter check SQS never answers: the pre-receive callback rejects", async () => {
    const { sqs, idempotency } = setup();
    sqs.hangQueueAttributes = true;
    const wiring = createSqsConsumerWiring(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE },
      () => 1,
    );
    const polling = wiring.preReceiveMessageCallback();
    await until('the dead-letter check sent', () => sqs.attributeRequests === 1);
    wiring.close();
    // Without the abort it never settles (the test times out), and holds the Consumer's last poll.
    await expect(polling).rejects.toThrow('GetQueueAttributes');
    expect(sqs.attributeAborts).toBe(1);
  });
});

/**
 * A FIFO group of two messages (keys `a`, then `b`) on a poller with `stopTimeoutMs: 50`: `stop()` is
 * called while the second message's own claim is held (the first call of `claimSpy`), and that claim is
 * answered (`answer`) only once `stop()` gave up on the message. Resolves once the second message's
 * processing ended, with the `settled` decisions (`action:reason`) and the keys whose handler ran.
 */
async function stopDuringSecondFifoClaim(
  idempotency: Idempotency,
  sqs: FakeSqs,
  claimSpy: { mock: { calls: unknown[] } },
  answer: () => void,
): Promise<{ settled: string[]; ran: string[] }> {
  const process = jest.spyOn(SqsMessagePort.prototype, 'process');
  const { poller, ran, settled } = watchedPoller(idempotency, sqs, {
    queueUrl: `${QUEUE}.fifo`,
    stopTimeoutMs: 50,
  });
  sqs.batches.push([message('1', { key: 'a', group: 'g' }), message('2', { key: 'b', group: 'g' })]);
  await poller.start();
  await until('the second message claimed', () => claimSpy.mock.calls.length === 1);
  const stopped = poller.stop();
  await until('the second message abandoned', () => settled.length === 2);
  answer();
  await expect(stopped).resolves.toEqual({ abandoned: 1 });
  await processed(process, 1);
  return { settled, ran };
}

/**
 * The claim the poller got on `k` after the holder (`held`) gave it up is released for the redelivery (a
 * greater token than the holder's), and the message was not deleted.
 */
async function expectClaimGivenBack(
  idempotency: Idempotency,
  held: { readonly fencingToken: number },
  sqs: FakeSqs,
): Promise<void> {
  const record = await idempotency.store.get({ scope: 'orders', key: 'k' });
  expect(record).toMatchObject({ state: 'RELEASED' });
  expect(record?.fencingToken).toBeGreaterThan(held.fencingToken);
  expect(sqs.deleted).toEqual([]);
}

/**
 * `stop()` while the message's visibility change is held: once the message is reported abandoned the change
 * is answered (`answer`); `stop()` resolves with it abandoned, and once its processing ended (`process`, the
 * spied `SqsMessagePort.process`) no handler has run.
 */
async function stopAbandoningUnrun(
  { poller, settled, ran }: ReturnType<typeof watchedPoller>,
  answer: () => void,
  process: jest.SpyInstance,
): Promise<void> {
  const stopped = poller.stop();
  await until('the message abandoned', () => settled.length === 1);
  answer();
  await expect(stopped).resolves.toEqual({ abandoned: 1 });
  await processed(process);
  expect(settled).toEqual(['leave:abandoned']);
  expect(ran).toEqual([]);
}

/**
 * A poller on the fake SQS (`QUEUE`, `waitTimeSeconds: 0`, then `options`) whose handler records the key of
 * each message it runs (`ran`), with its `settled` events as `action:reason`.
 */
function watchedPoller(idempotency: Idempotency, sqs: FakeSqs, options: Partial<SqsPollerOptions>) {
  const ran: string[] = [];
  const poller = new IdempotentSqsPoller(
    { idempotency, sqs: sqs.client, logger: false },
    { queueUrl: QUEUE, waitTimeSeconds: 0, ...options },
    ({ key }) => {
      ran.push(key!);
    },
  );
  const settled: string[] = [];
  poller.on('settled', (e) => settled.push(`${e.decision.action}:${e.decision.reason}`));
  return { poller, ran, settled };
}

/**
 * Waits for the `call`th call of the spied `SqsMessagePort.process` to end (the message's decision
 * carried out: nothing more is sent for it after that), then restores the spy.
 */
async function processed(process: jest.SpyInstance, call = 0): Promise<void> {
  await process.mock.results[call]!.value;
  process.mockRestore();
}

describe('a claim the store wrote before it failed, whose give-back went unanswered too (StoreUnavailableError.writtenClaim)', () => {
  /**
   * A memory store that fails like `RedisIdempotencyStore` with `waitForReplicas` whose `WAIT` (or `start`)
   * and then the runner's own give-back go unanswered: the next `call` (after `before`) applies a claim,
   * then rejects naming it ({@link nextClaimWrittenThenUnanswered}); from then on `release` and `ping` reject until the poller emits
   * `storeUnavailable`, when the store comes back. `givenBack` resolves once a release is answered.
   */
  function writtenThenDown(
    call: 'claim' | 'waitForOutcome',
    before: (release: MemoryIdempotencyStore['release']) => Promise<unknown>,
  ) {
    const store = new MemoryIdempotencyStore();
    const release = store.release.bind(store);
    // Down from the written claim on (the poller's start pings first).
    const state = { written: false, down: true };
    const unanswered = () => Promise.reject(new StoreUnavailableError('Connection is closed.'));
    nextClaimWrittenThenUnanswered(store, call, {
      before: () => before(release),
      written: () => {
        state.written = true;
      },
    });
    let answered!: () => void;
    const givenBack = new Promise<void>((resolve) => (answered = resolve));
    jest.spyOn(store, 'release').mockImplementation(async (...a) => {
      if (state.written && state.down) return unanswered();
      const reply = await release(...a);
      answered();
      return reply;
    });
    jest
      .spyOn(store, 'ping')
      .mockImplementation(() => (state.written && state.down ? unanswered() : Promise.resolve()));
    return { store, state, givenBack };
  }

  /** Runs `first` on a poller until the written claim was given back, then `k`'s redelivery. */
  async function redelivered(
    queueUrl: string,
    t: ReturnType<typeof writtenThenDown>,
    first: Message[],
    options: Partial<SqsPollerOptions> = {},
  ) {
    const { sqs, idempotency } = setup(t.store);
    const attempts: string[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      {
        queueUrl,
        waitTimeSeconds: 0,
        storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' },
        ...options,
      },
      ({ key, attempt }) => {
        attempts.push(`${key}#${attempt}`);
      },
    );
    poller.once('storeUnavailable', () => {
      t.state.down = false;
    });
    await poller.start();
    try {
      sqs.batches.push(first);
      // Bounded, then asserted: before the fix the written claim was never given back.
      await Promise.race([t.givenBack, new Promise((r) => setTimeout(r, 3_000))]);
      const id = { scope: new URL(queueUrl).pathname.split('/').pop()!, key: 'k' };
      expect(await t.store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
      const deleted = sqs.deleted.length;
      // The same message again (its body: the payload the claim was made with).
      const body = first.find((m) => m.MessageAttributes?.['idempotency-key']?.StringValue === 'k')!.Body!;
      sqs.batches.push([message(body, { key: 'k', ...(queueUrl.endsWith('.fifo') ? { group: 'g' } : {}) })]);
      await until('the redelivery deleted', () => sqs.deleted.length === deleted + 1);
      expect(await t.store.get(id)).toMatchObject({ state: 'COMPLETED', attempt: 1 });
      return attempts;
    } finally {
      await poller.stop();
    }
  }

  it('of a CONFLICT wait is given back once the store answers: the redelivery runs at once, as attempt 1 (it met the claim as a CONFLICT until its lease lapsed)', async () => {
    // Another worker holds k; it gives it up as the wait begins, and the wait's claim takes it.
    let holder: { fencingToken: number } | undefined;
    const t = writtenThenDown('waitForOutcome', (release) =>
      release({ scope: 'orders', key: 'k' }, holder!.fencingToken, {
        retentionMs: 60_000,
        neverStarted: true,
      }),
    );
    holder = (await t.store.claim(
      { scope: 'orders', key: 'k' },
      { leaseMs: 60_000, retentionMs: 60_000, reserve: true },
    )) as { fencingToken: number };
    const attempts = await redelivered(QUEUE, t, [message('x', { key: 'k' })], { conflictWaitMs: 1000 });
    expect(attempts).toEqual(['k#1']);
  });

  it("of a FIFO message's own claim is given back once the store answers: the redelivery runs at once, as attempt 1", async () => {
    const t = writtenThenDown('claim', async () => undefined);
    // The batch claims the group's first message (a); the second (k) claims on its own, after a ran.
    const attempts = await redelivered(`${QUEUE}.fifo`, t, [
      message('1', { key: 'a', group: 'g' }),
      message('2', { key: 'k', group: 'g' }),
    ]);
    expect(attempts).toEqual(['a#1', 'k#1']);
  });

  it("failing open: a FIFO message's own written claim is given back (one try) before the runner's claim, which then runs it claimed, as attempt 1", async () => {
    const store = new MemoryIdempotencyStore();
    const sqs = new FakeSqs();
    const idempotency = new Idempotency(
      { store, logger: false },
      { leaseMs: 3000, storeFailureMode: 'open' },
    );
    nextClaimWrittenThenUnanswered(store);
    // The runner's own give-back goes unanswered; the store answers from then on.
    jest.spyOn(store, 'release').mockRejectedValueOnce(new StoreUnavailableError('Connection is closed.'));
    const outcomes: string[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: `${QUEUE}.fifo`, waitTimeSeconds: 0 },
      ({ key, outcome, attempt }) => {
        outcomes.push(`${key} ${outcome} #${attempt}`);
      },
    );
    await poller.start();
    try {
      // The batch claims the group's first message (a); the second (k) claims on its own, after a ran.
      sqs.batches.push([message('1', { key: 'a', group: 'g' }), message('2', { key: 'k', group: 'g' })]);
      await until('both deleted', () => sqs.deleted.length === 2);
      expect(outcomes).toEqual(['a ACQUIRED #1', 'k ACQUIRED #1']);
      expect(await store.get({ scope: 'orders.fifo', key: 'k' })).toMatchObject({
        state: 'COMPLETED',
        attempt: 1,
      });
    } finally {
      await poller.stop();
    }
  });
});

describe('a handler that completed whose COMPLETED write the store did not answer (recorded: false)', () => {
  /**
   * A memory store that stops answering `complete` and `ping` as the handler returns (`down`), until the
   * consumer reports `storeUnavailable` (see each test); a runner with one write attempt. `written`
   * resolves with the first `completed` event whose write was recorded (a 3 s bound: before the fix none
   * came, and the record stayed IN_PROGRESS until its lease lapsed). `durations`: every `completed` event's
   * `recorded` and `durationMs`, in order (the handler takes at least 5 ms).
   */
  function downAfterHandler() {
    const store = new MemoryIdempotencyStore();
    const state = { down: false };
    const unanswered = () => Promise.reject(new StoreUnavailableError('Connection is closed.'));
    const complete = store.complete.bind(store);
    jest.spyOn(store, 'complete').mockImplementation((...a) => (state.down ? unanswered() : complete(...a)));
    jest.spyOn(store, 'ping').mockImplementation(() => (state.down ? unanswered() : Promise.resolve()));
    const sqs = new FakeSqs();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 10_000, writeAttempts: 1 });
    const unrecorded: unknown[] = [];
    const durations: { recorded: boolean; durationMs: number }[] = [];
    idempotency.on('completed', (e) => {
      if (!e.recorded) unrecorded.push(e);
      durations.push({ recorded: e.recorded, durationMs: e.durationMs });
    });
    const written = new Promise<'written' | 'not written'>((resolve) => {
      idempotency.on('completed', (e) => {
        if (e.recorded) resolve('written');
      });
      setTimeout(resolve, 3_000, 'not written').unref();
    });
    let runs = 0;
    const handler = async () => {
      runs += 1;
      await new Promise((r) => setTimeout(r, 5)); // the handler's own work
      state.down = true;
      return 'done';
    };
    return { store, state, sqs, idempotency, unrecorded, durations, written, handler, runs: () => runs };
  }

  it("poller: the message is deleted; once the store answers the record is COMPLETED (the late completed event carrying the handler's run time, as the unrecorded one did), and a redelivery of the key is a DUPLICATE (the handler ran once)", async () => {
    const t = downAfterHandler();
    const poller = new IdempotentSqsPoller(
      { idempotency: t.idempotency, sqs: t.sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' } },
      t.handler,
    );
    const settled: Settled[] = [];
    poller.on('settled', (e) => settled.push(e));
    poller.once('storeUnavailable', () => {
      t.state.down = false;
    });
    await poller.start();
    try {
      const first = message('x', { key: 'k' });
      t.sqs.batches.push([first]);
      expect(await t.written).toBe('written');
      expect(t.durations).toEqual([
        { recorded: false, durationMs: expect.any(Number) },
        { recorded: true, durationMs: t.durations[0]!.durationMs },
      ]);
      expect(t.durations[0]!.durationMs).toBeGreaterThan(0);
      expect(t.unrecorded).toHaveLength(1);
      await until('the message deleted', () => settled.length === 1);
      expect(t.sqs.deleted).toEqual([first.ReceiptHandle]);
      expect(await t.store.get({ scope: 'orders', key: 'k' })).toMatchObject({ state: 'COMPLETED' });
      // The same key again (a producer's second send, or SQS delivering a deleted message again).
      const again = message('x', { key: 'k' });
      t.sqs.batches.push([again]);
      await until('the redelivery deleted', () => t.sqs.deleted.length === 2);
      expect(settled.map((e) => `${e.outcome} ${e.decision.action}`)).toEqual([
        'ACQUIRED delete',
        'DUPLICATE delete',
      ]);
      expect(t.runs()).toBe(1);
    } finally {
      await poller.stop();
    }
  });

  it('storeFailureMode open: a late try the store does not answer either is tried again when the gate opens next, until the write lands (it stopped after one)', async () => {
    const store = new MemoryIdempotencyStore();
    const complete = store.complete.bind(store);
    let unanswered = 2; // the runner's own write, then the first late try
    jest.spyOn(store, 'complete').mockImplementation((...a) => {
      if (unanswered === 0) return complete(...a);
      unanswered -= 1;
      return Promise.reject(new StoreUnavailableError('Connection is closed.'));
    });
    const idempotency = new Idempotency(
      { store, logger: false },
      { leaseMs: 10_000, writeAttempts: 1, storeFailureMode: 'open' },
    );
    const written = new Promise<'written' | 'not written'>((resolve) => {
      idempotency.on('completed', (e) => {
        if (e.recorded) resolve('written');
      });
      setTimeout(resolve, 3_000, 'not written').unref();
    });
    const sqs = new FakeSqs();
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' } },
      () => 'done',
    );
    const storeErrors: string[] = [];
    poller.on('storeError', (e) => storeErrors.push(e.operation));
    await poller.start();
    try {
      sqs.batches.push([message('x', { key: 'k' })]);
      expect(await written).toBe('written');
      expect(await store.get({ scope: 'orders', key: 'k' })).toMatchObject({ state: 'COMPLETED' });
      expect(storeErrors).toEqual(['complete']);
      await until('the message deleted', () => sqs.deleted.length === 1);
    } finally {
      await poller.stop();
    }
  });

  it("sqs-consumer wiring: the message is returned for deletion; once the store answers the record is COMPLETED (the late completed event carrying the handler's run time), and a redelivery of the key is a DUPLICATE (the handler ran once)", async () => {
    const t = downAfterHandler();
    const wiring = createSqsConsumerWiring(
      { idempotency: t.idempotency, sqs: t.sqs.client, logger: false },
      { queueUrl: QUEUE, storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' } },
      t.handler,
    );
    const settled: Settled[] = [];
    wiring.events.on('settled', (e) => settled.push(e));
    wiring.events.once('storeUnavailable', () => {
      t.state.down = false;
    });
    try {
      const first = message('x', { key: 'k' });
      expect(await wiring.handleMessage!(first)).toBe(first);
      expect(await t.written).toBe('written');
      expect(t.durations).toEqual([
        { recorded: false, durationMs: expect.any(Number) },
        { recorded: true, durationMs: t.durations[0]!.durationMs },
      ]);
      expect(t.durations[0]!.durationMs).toBeGreaterThan(0);
      expect(await t.store.get({ scope: 'orders', key: 'k' })).toMatchObject({ state: 'COMPLETED' });
      await wiring.preReceiveMessageCallback(); // the gate is open again
      const again = message('x', { key: 'k' });
      expect(await wiring.handleMessage!(again)).toBe(again);
      expect(settled.map((e) => `${e.outcome} ${e.decision.action}`)).toEqual([
        'ACQUIRED delete',
        'DUPLICATE delete',
      ]);
      expect(t.runs()).toBe(1);
    } finally {
      wiring.close();
    }
  });
});
