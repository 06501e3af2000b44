import type { Message } from '@aws-sdk/client-sqs';
import { type IdempotencyLogger, NonRetryableError, TopologyMismatchError } from '@idempotent-consumer/core';
import {
  createSqsConsumerWiring,
  DeadLetterRefusedError,
  IdempotentSqsPoller,
  type SqsHandlerContext,
  type SqsIdempotencyEvents,
  type SqsIdempotencyOptions,
} from '@idempotent-consumer/sqs';
import { Consumer } from 'sqs-consumer';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { queueDepth, receiveAll, sendMessage } from '../../support/sqs-helpers';

jest.setTimeout(60_000);

type DeadLettered = SqsIdempotencyEvents['deadLettered'][0];

/** A key extractor that reads the key from a JSON body, so a malformed body makes it throw. */
function jsonKey(calls: string[]) {
  return (message: Message): string => {
    calls.push(message.Body ?? '');
    return (JSON.parse(message.Body ?? '') as { id: string }).id;
  };
}

describeWithServices(['redis', 'sqs'], 'sqs dead-letter paths on the SQS emulator', ({ redis, sqs }) => {
  const fx = SqsFixture.forSuite(redis, sqs);
  const stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await Promise.all(stops.splice(0).map((s) => s()));
  });

  function poller<T>(...args: ConstructorParameters<typeof IdempotentSqsPoller<T>>) {
    const p = new IdempotentSqsPoller<T>(...args);
    stops.push(async () => {
      await p.stop();
    });
    return p;
  }

  function consumer(options: Parameters<typeof Consumer.create>[0]): Consumer {
    const c = Consumer.create({ sqs: fx.sqs, waitTimeSeconds: 1, ...options });
    c.on('error', () => {});
    stops.push(
      () =>
        new Promise<void>((resolve) => {
          if (!c.status.isRunning) return resolve();
          c.once('stopped', () => resolve());
          c.stop({ abort: true });
        }),
    );
    return c;
  }

  type Form = 'poller' | 'handleMessage' | 'handleMessageBatch';

  /** Starts the form on `options` and reports every dead-lettered message to `onDeadLettered`. */
  async function startForm(
    form: Form,
    options: SqsIdempotencyOptions,
    handler: (context: SqsHandlerContext) => Promise<unknown>,
    onDeadLettered: (e: DeadLettered) => void,
    extra: {
      logger?: IdempotencyLogger;
      onInvalidKey?: (e: SqsIdempotencyEvents['invalidKey'][0]) => void;
    } = {},
  ): Promise<void> {
    const deps = { idempotency: fx.idempotency({ leaseMs: 3000 }), sqs: fx.sqs, logger: extra.logger };
    if (form === 'poller') {
      const p = poller(deps, { ...options, waitTimeSeconds: 1 }, handler);
      p.on('deadLettered', onDeadLettered);
      if (extra.onInvalidKey) p.on('invalidKey', extra.onInvalidKey);
      await p.start();
      return;
    }
    const wiring = createSqsConsumerWiring(
      deps,
      { ...options, batch: form === 'handleMessageBatch' },
      handler,
    );
    wiring.events.on('deadLettered', onDeadLettered);
    if (extra.onInvalidKey) wiring.events.on('invalidKey', extra.onInvalidKey);
    await wiring.verifyDeadLetter();
    consumer({ ...wiring, queueUrl: options.queueUrl, batchSize: 10 }).start();
  }

  describe.each<Form>(['poller', 'handleMessage', 'handleMessageBatch'])('%s', (form) => {
    it('dead-letters a message whose key extractor throws as invalid-key, once, without running the handler', async () => {
      const dlq = await fx.queue(`inv-dlq-${form}`);
      const q = await fx.queue(`inv-${form}`);
      const extracted: string[] = [];
      const ran: string[] = [];
      const dead: DeadLettered[] = [];
      await startForm(
        form,
        {
          queueUrl: q.url,
          idempotencyKey: jsonKey(extracted),
          deadLetter: { queueUrl: dlq.url },
          retryBackoff: { baseMs: 0 },
        },
        async ({ message: m }) => ran.push(m.Body!),
        (p) => dead.push(p),
      );
      await sendMessage(fx.sqs, q.url, 'not json');
      await sendMessage(fx.sqs, q.url, JSON.stringify({ id: 'ok-1' }));
      let copies: Message[] = [];
      await waitFor('the malformed message in the DLQ', async () => {
        copies.push(...(await receiveAll(fx.sqs, dlq.url, 0)));
        return copies.length >= 1;
      });
      await waitFor('source queue empty', async () => (await queueDepth(fx.sqs, q.url)) === 0);
      copies = [...copies, ...(await receiveAll(fx.sqs, dlq.url, 0))];
      expect(copies.map((c) => c.Body)).toEqual(['not json']);
      const attribute = (name: string) => copies[0]!.MessageAttributes![name]?.StringValue;
      expect(attribute('x-idempotency-dead-letter-reason')).toBe('invalid-key');
      expect(attribute('x-idempotency-error')).toContain('SyntaxError');
      expect(ran).toEqual([JSON.stringify({ id: 'ok-1' })]);
      expect(extracted.filter((b) => b === 'not json')).toHaveLength(1);
      expect(dead).toHaveLength(1);
      expect(dead[0]).toMatchObject({
        reason: 'invalid-key',
        key: undefined,
        via: 'copy',
        destination: dlq.url,
      });
      // The event's error is the text the copy carries, as in every adapter.
      expect(dead[0]!.error).toBe(attribute('x-idempotency-error'));
      expect(dead[0]!.error).toMatch(/^InvalidKeyError \[INVALID_IDEMPOTENCY_KEY\]: /);
    });

    it('dead-letters a message whose key attribute the store refuses (longer than its maxKeyBytes) as invalid-key, reported by the adapter: an invalidKey event each, one warning, no runner error line', async () => {
      const dlq = await fx.queue(`long-key-dlq-${form}`);
      const q = await fx.queue(`long-key-${form}`);
      const ran: string[] = [];
      const dead: DeadLettered[] = [];
      const invalid: string[] = [];
      const lines: string[] = [];
      const keep = (message: string) => void lines.push(message);
      await startForm(
        form,
        { queueUrl: q.url, deadLetter: { queueUrl: dlq.url }, retryBackoff: { baseMs: 0 } },
        async ({ message: m }) => ran.push(m.Body!),
        (p) => dead.push(p),
        { logger: { warn: keep, error: keep }, onInvalidKey: (e) => invalid.push(e.error.name) },
      );
      // The store takes 512 bytes; a batch with such a key is claimed message by message.
      await sendMessage(fx.sqs, q.url, 'long-1', { key: `${'k'.repeat(600)}-1` });
      await sendMessage(fx.sqs, q.url, 'long-2', { key: `${'k'.repeat(600)}-2` });
      await sendMessage(fx.sqs, q.url, 'fine', { key: 'fine' });
      await waitFor('both dead-lettered and the fine one run', () => dead.length >= 2 && ran.length >= 1);
      expect(dead.map((d) => d.reason)).toEqual(['invalid-key', 'invalid-key']);
      expect(ran).toEqual(['fine']);
      expect(invalid).toEqual(['InvalidKeyError', 'InvalidKeyError']);
      // The adapter's one warning says it; the runner no longer adds an error line per message.
      expect(lines).toEqual([
        expect.stringMatching(
          /invalid idempotency key or payload \(InvalidKeyError \[INVALID_IDEMPOTENCY_KEY\]: The idempotency key is 602 bytes long.*dead-lettered \(reason invalid-key\)/,
        ),
      ]);
    });

    it("refuses to start when deadLetter is 'redrive-policy' and the queue has no RedrivePolicy", async () => {
      const q = await fx.queue(`no-redrive-${form}`, {}, false, { redrive: false });
      await sendMessage(fx.sqs, q.url, 'waits');
      const ran: string[] = [];
      const start = startForm(
        form,
        { queueUrl: q.url },
        async ({ message: m }) => ran.push(m.Body!),
        () => {},
      );
      await expect(start).rejects.toBeInstanceOf(TopologyMismatchError);
      await expect(start).rejects.toMatchObject({ code: 'TOPOLOGY_MISMATCH', retryable: false });
      if (form !== 'poller') {
        // A Consumer started anyway, with waitForStore as preReceiveMessageCallback, receives nothing: every
        // poll is refused with the same error (sqs-consumer reports it as `error` and polls again).
        const deps = { idempotency: fx.idempotency(), sqs: fx.sqs };
        const wiring = createSqsConsumerWiring(deps, { queueUrl: q.url }, async ({ message: m }) =>
          ran.push(m.Body!),
        );
        const errors: unknown[] = [];
        const c = consumer({ ...wiring, queueUrl: q.url, pollingWaitTimeMs: 10 });
        c.on('error', (e) => errors.push(e));
        c.start();
        await waitFor('two refused polls', () => errors.length >= 2);
        expect(String(errors[0])).toContain('RedrivePolicy');
      }
      expect(ran).toEqual([]);
      const [left] = await receiveAll(fx.sqs, q.url, 0);
      expect(left?.Body).toBe('waits');
    });

    it("with 'redrive-policy', reports deadLettered once per message and SQS moves it to the DLQ", async () => {
      const dlq = await fx.queue(`redrive-dlq-${form}`, {}, false, { redrive: false });
      const q = await fx.queue(`redrive-${form}`, {
        RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: '3' }),
      });
      const ran: string[] = [];
      const dead: DeadLettered[] = [];
      await startForm(
        form,
        { queueUrl: q.url, retryBackoff: { baseMs: 0 } },
        async ({ message: m }) => {
          ran.push(m.Body!);
          throw new NonRetryableError('card declined');
        },
        (p) => dead.push(p),
      );
      await sendMessage(fx.sqs, q.url, 'declined', { key: `declined-${form}` });
      let moved: Message[] = [];
      await waitFor('SQS moved it to the DLQ', async () => {
        moved = await receiveAll(fx.sqs, dlq.url, 0);
        return moved.length === 1;
      });
      expect(moved[0]!.Body).toBe('declined');
      expect(ran).toEqual(['declined']);
      expect(dead).toHaveLength(1);
      // The receive that reaches maxReceiveCount meets the FAILED record the first receive wrote.
      expect(dead[0]).toMatchObject({ reason: 'failed-record', via: 'redrive-policy', destination: dlq.arn });
      expect(dead[0]!.message.Attributes?.ApproximateReceiveCount).toBe('3');
      expect(await queueDepth(fx.sqs, q.url)).toBe(0);
    });
  });

  it('a dead-letter copy SQS refuses for good (over the DLQ size limit) is a DeadLetterRefusedError naming the cause, logged once; the message stays on its queue', async () => {
    const dlq = await fx.queue('refused-dlq', { MaximumMessageSize: '1024' }, false, { redrive: false });
    const q = await fx.queue('refused');
    // The body fits the source queue; its copy, with the added x-idempotency-* attributes, not the DLQ.
    await sendMessage(fx.sqs, q.url, 'x'.repeat(1000), { key: 'too-big' });
    const warnings: string[] = [];
    const errors: unknown[] = [];
    let runs = 0;
    const p = poller(
      {
        idempotency: fx.idempotency({ leaseMs: 3000 }),
        sqs: fx.sqs,
        logger: { warn: (message) => warnings.push(message), error: () => {} },
      },
      { queueUrl: q.url, deadLetter: { queueUrl: dlq.url }, waitTimeSeconds: 1, visibilityTimeoutSeconds: 1 },
      async () => {
        runs += 1;
        throw new NonRetryableError('declined');
      },
    );
    p.on('brokerError', (e) => {
      if (e.operation === 'dead-letter') errors.push(e.error);
    });
    await p.start();
    // Back after its visibility timeout, the FAILED record sends the copy again, refused again.
    await waitFor('the copy refused on two receives', () => errors.length >= 2, 20_000);
    await p.stop();
    expect(errors[0]).toBeInstanceOf(DeadLetterRefusedError);
    expect(errors[0]).toMatchObject({
      code: 'DEAD_LETTER_REFUSED',
      retryable: false,
      // The emulator answers the query-compatible code AWS.SimpleQueueService.InvalidParameterValue.
      sqsCode: expect.stringContaining('InvalidParameterValue'),
      tooLarge: true,
    });
    expect((errors[0] as Error).message).toContain(dlq.url);
    expect((errors[0] as Error).message).toContain('MaximumMessageSize');
    expect(warnings.filter((w) => w.includes('refused the dead-letter copy'))).toHaveLength(1);
    expect(runs).toBe(1);
    // Nothing lost: not deleted, since no copy was confirmed.
    expect(await queueDepth(fx.sqs, q.url)).toBe(1);
    expect(await queueDepth(fx.sqs, dlq.url)).toBe(0);
  });
});
