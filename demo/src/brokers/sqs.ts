/**
 * The demo on SQS: the producer sends payment messages to a standard queue (message attribute
 * `idempotency-key`); each consumer process consumes it with `@idempotent-consumer/sqs`'s
 * `IdempotentSqsPoller` (`sdk`) or with a plain receive/delete loop (`naive`). Without `SQS_ENDPOINT`,
 * `preflight` starts the fauxqs emulator inside the orchestrator process, so the demo runs on a fresh
 * machine; the consumers get its endpoint through the run's config.
 */
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  ListQueuesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { IdempotentSqsPoller } from '@idempotent-consumer/sqs';
import type { DemoBroker, DemoConsumerContext, DemoMode, PaymentMessage } from '../broker';

/** fauxqs's `buildApp` (ESM-only package, loaded with a real dynamic `import()`). */
type FauxqsModule = {
  buildApp(options: { logger?: boolean }): {
    listen(options: { port: number; host: string }): Promise<string>;
    close(): Promise<unknown>;
  };
};

/**
 * An SQS client for `endpoint`. With an emulator (no `AWS_ACCESS_KEY_ID`), dummy credentials; requests
 * always go to `endpoint` (`useQueueUrlAsEndpoint: false`), whatever host the emulator's queue URLs name.
 */
function client(endpoint: string): SQSClient {
  return new SQSClient({
    endpoint,
    region: process.env.AWS_REGION ?? 'us-east-1',
    credentials: process.env.AWS_ACCESS_KEY_ID ? undefined : { accessKeyId: 'demo', secretAccessKey: 'demo' },
    useQueueUrlAsEndpoint: false,
  });
}

/** The visibility timeout of the demo's queue, in seconds: the lease rounded up (the demo's lease is ~3 s). */
const visibilitySeconds = (leaseMs: number) => Math.max(1, Math.ceil(leaseMs / 1000));

const parse = (message: Message) => JSON.parse(message.Body ?? '{}') as PaymentMessage;

/** The producer side: starts or finds SQS, creates the queue and its dead-letter queue per run. */
export function sqsBroker(): DemoBroker {
  let endpoint = process.env.SQS_ENDPOINT;
  let stopEmulator: (() => Promise<unknown>) | undefined;
  let sqs: SQSClient | undefined;
  let queues: { queue: string; dlq: string } | undefined;

  const open = (): SQSClient => {
    if (!endpoint) throw new Error('preflight() first');
    sqs ??= client(endpoint);
    return sqs;
  };

  return {
    name: 'sqs',
    async preflight() {
      if (!endpoint) {
        try {
          const importEsm = new Function('s', 'return import(s)') as (s: string) => Promise<unknown>;
          const { buildApp } = (await importEsm('fauxqs')) as FauxqsModule;
          const app = buildApp({ logger: false });
          const address = await app.listen({ port: 0, host: '127.0.0.1' });
          endpoint = address.replace('localhost', '127.0.0.1');
          stopEmulator = () => app.close();
        } catch (error) {
          return `could not start the embedded SQS emulator (fauxqs: ${(error as Error).message}); set SQS_ENDPOINT to an SQS endpoint (LocalStack: http://127.0.0.1:4566)`;
        }
      }
      try {
        await open().send(new ListQueuesCommand({ MaxResults: 1 }));
        return null;
      } catch (error) {
        return `SQS is not reachable at ${endpoint} (${(error as Error).message}); unset SQS_ENDPOINT to use the embedded emulator`;
      }
    },
    async setup(runId: string, _mode: DemoMode) {
      const sqs = open();
      const base = `demo-${runId}`.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 70);
      const dlq = (await sqs.send(new CreateQueueCommand({ QueueName: `${base}-dlq` }))).QueueUrl!;
      const queue = (await sqs.send(new CreateQueueCommand({ QueueName: `${base}-payments` }))).QueueUrl!;
      queues = { queue, dlq };
      return { endpoint: endpoint!, queueUrl: queue, deadLetterQueueUrl: dlq };
    },
    async publish(messages: readonly PaymentMessage[]) {
      const sqs = open();
      if (!queues) throw new Error('setup() first');
      for (let i = 0; i < messages.length; i += 10) {
        const batch = messages.slice(i, i + 10);
        const out = await sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: queues.queue,
            Entries: batch.map((m, j) => ({
              Id: `m${j}`,
              MessageBody: JSON.stringify(m),
              MessageAttributes: { 'idempotency-key': { DataType: 'String', StringValue: m.idempotencyKey } },
            })),
          }),
        );
        if (out.Failed?.length) {
          throw new Error(`SendMessageBatch failed for ${out.Failed.length} entries: ${out.Failed[0]!.Code}`);
        }
      }
    },
    async teardown() {
      const q = queues;
      queues = undefined;
      if (!q || !sqs) return;
      for (const url of [q.queue, q.dlq])
        await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
    },
    async close() {
      sqs?.destroy();
      sqs = undefined;
      await stopEmulator?.();
      stopEmulator = undefined;
    },
  };
}

/** The consumer side, in one consumer process. */
export async function startConsumer(context: DemoConsumerContext): Promise<{ stop(): Promise<void> }> {
  const { endpoint, queueUrl, deadLetterQueueUrl } = context.config;
  if (!endpoint || !queueUrl || !deadLetterQueueUrl) {
    throw new Error(
      'The sqs demo consumer needs config.endpoint, config.queueUrl and config.deadLetterQueueUrl',
    );
  }
  const sqs = client(endpoint);
  const { counters } = context;

  if (context.mode === 'sdk') {
    if (!context.idempotency) throw new Error('sdk mode needs context.idempotency');
    const leaseMs = context.idempotency.options.leaseMs;
    const poller = new IdempotentSqsPoller(
      { idempotency: context.idempotency, sqs },
      {
        queueUrl,
        concurrency: 8,
        waitTimeSeconds: 1,
        visibilityTimeoutSeconds: visibilitySeconds(leaseMs),
        retryBackoff: { baseMs: 250, factor: 2, maxMs: 2000 },
        deadLetter: { queueUrl: deadLetterQueueUrl },
        storeProbeBackoff: { baseMs: 250, maxMs: 250 },
      },
      async ({ message, fencingToken }) => {
        await context.charge(parse(message), fencingToken);
      },
    );
    poller.on('received', ({ messages }) => {
      counters.deliveries += messages.length;
    });
    poller.on('deadLettered', () => counters.deadLettered++);
    poller.start();
    return {
      async stop() {
        await poller.stop();
        sqs.destroy();
      },
    };
  }

  // naive: receive, charge, delete; on an error make the message visible again at once.
  let stopping = false;
  const abort = new AbortController();
  const inFlight = new Set<Promise<void>>();
  const visibility = visibilitySeconds(3000); // the demo's default lease
  const loop = (async () => {
    while (!stopping) {
      let messages: Message[] = [];
      try {
        const out = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: Math.max(1, 8 - inFlight.size),
            WaitTimeSeconds: 1,
            VisibilityTimeout: visibility,
          }),
          { abortSignal: abort.signal },
        );
        messages = out.Messages ?? [];
      } catch {
        if (stopping) break;
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      for (const message of messages) {
        counters.deliveries++;
        const task = context
          .charge(parse(message))
          .then(
            () =>
              sqs.send(
                new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }),
              ),
            () =>
              sqs.send(
                new ChangeMessageVisibilityCommand({
                  QueueUrl: queueUrl,
                  ReceiptHandle: message.ReceiptHandle,
                  VisibilityTimeout: 0,
                }),
              ),
          )
          .then(
            () => {},
            () => {},
          )
          .finally(() => inFlight.delete(task));
        inFlight.add(task);
      }
      while (inFlight.size >= 8) await Promise.race(inFlight);
    }
  })();
  return {
    async stop() {
      stopping = true;
      abort.abort();
      await loop;
      await Promise.allSettled([...inFlight]);
      sqs.destroy();
    },
  };
}
