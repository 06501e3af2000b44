import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import type { Idempotency } from '@idempotent-consumer/core';
import { IdempotentSqsPoller } from '@idempotent-consumer/sqs';
import type { BareScripts } from '../bare-scripts';
import { BUSY } from '../contender';
import type { CpuMeter } from '../cpu-meter';
import { type AdapterRow, row, settleCounter } from './adapter-row';

const CONCURRENCY = 32;

/**
 * Starts fauxqs (the SQS emulator the integration suites use) in a child process, so the emulator's CPU
 * is not the bench's event loop. Resolves its endpoint.
 */
async function startFauxqs(): Promise<{ endpoint: string; child: ChildProcess }> {
  const script =
    "const { buildApp } = await import('fauxqs'); const app = buildApp({ logger: false });" +
    "const a = await app.listen({ port: 0, host: '127.0.0.1' }); process.stdout.write(a + '\\n');";
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: __dirname,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const endpoint = await new Promise<string>((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('\n')) resolve(text.trim().replace('localhost', '127.0.0.1'));
    });
    child.once('exit', (code) => reject(new Error(`fauxqs exited (${code}) before listening`)));
  });
  return { endpoint, child };
}

/**
 * SQS (`SQS_ENDPOINT`, else fauxqs in a child process): `messages` messages in each of three fresh
 * queues; a receive/delete loop on the same `SQSClient` (32 messages in flight: ReceiveMessage of up to
 * 10, no-op handler, DeleteMessageBatch) drains the first; the same loop with `scripts` claiming (with the
 * body's fingerprint, as the adapter's default) and completing each message around the handler (key: its
 * `MessageId`) the second; `IdempotentSqsPoller` at concurrency 32 the third.
 * `meter` reads the emulator's CPU time too (the child process this bench started).
 */
export async function benchSqs(
  idempotency: Idempotency,
  scripts: BareScripts,
  messages: number,
  meter: CpuMeter,
): Promise<AdapterRow> {
  let child: ChildProcess | undefined;
  let endpoint = process.env.SQS_ENDPOINT;
  if (!endpoint) {
    ({ endpoint, child } = await startFauxqs());
    meter = meter.withBroker(child.pid);
  }
  const sqs = new SQSClient({
    endpoint,
    region: process.env.AWS_REGION ?? 'us-east-1',
    credentials: process.env.AWS_ACCESS_KEY_ID
      ? undefined
      : { accessKeyId: 'bench', secretAccessKey: 'bench' },
    useQueueUrlAsEndpoint: false,
  });
  const run = `bench-${process.pid}-${randomUUID().slice(0, 8)}`;
  const urls: string[] = [];
  try {
    for (const name of ['bare', 'scripts', 'sdk']) {
      const url = (await sqs.send(new CreateQueueCommand({ QueueName: `${run}-${name}` }))).QueueUrl!;
      urls.push(url);
      const sends: Promise<unknown>[] = [];
      for (let i = 0; i < messages; i += 10) {
        const entries = Array.from({ length: Math.min(10, messages - i) }, (_, j) => ({
          Id: `m${j}`,
          MessageBody: `{"n":${i + j}}`,
        }));
        sends.push(sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries })));
        if (sends.length >= 16) await Promise.all(sends.splice(0));
      }
      await Promise.all(sends);
    }
    const [bareUrl, scriptsUrl, sdkUrl] = urls as [string, string, string];
    // The poller verifies its dead-letter route at start (no handler fails here: the queue stays empty).
    const deadLetterUrl = (await sqs.send(new CreateQueueCommand({ QueueName: `${run}-dlq` }))).QueueUrl!;
    urls.push(deadLetterUrl);

    // A receive/delete loop on the same client: 32 in flight, delete after `handle` resolved for all.
    const drain = async (queueUrl: string, handle: (message: Message) => Promise<unknown>) => {
      const counter = settleCounter(messages, meter);
      let stopping = false;
      const receive = async () => {
        while (!stopping) {
          const out = await sqs.send(
            new ReceiveMessageCommand({
              QueueUrl: queueUrl,
              MaxNumberOfMessages: 10,
              WaitTimeSeconds: 1,
              VisibilityTimeout: 30,
            }),
          );
          const received: Message[] = out.Messages ?? [];
          if (received.length === 0) continue;
          await Promise.all(received.map(handle));
          await sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: queueUrl,
              Entries: received.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
            }),
          );
          counter.settled(received.length);
        }
      };
      const receivers = Array.from({ length: Math.ceil(CONCURRENCY / 10) }, () =>
        receive().catch((error: Error) => {
          stopping = true;
          counter.fail(error);
        }),
      );
      try {
        return await counter.done;
      } finally {
        stopping = true;
        await Promise.all(receivers);
      }
    };
    const bareSettled = await drain(bareUrl, async () => {});
    const scriptsSettled = await drain(scriptsUrl, async (message) => {
      if ((await scripts.process(message.MessageId!, async () => {}, message.Body)) === BUSY) {
        // Shown again while its claim is held: the visibility timeout (30 s) lapsed mid-pass.
        throw new Error(`the claim of ${message.MessageId} was not ACQUIRED`);
      }
    });

    const sdk = settleCounter(messages, meter);
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs },
      {
        queueUrl: sdkUrl,
        concurrency: CONCURRENCY,
        waitTimeSeconds: 1,
        visibilityTimeoutSeconds: 30,
        deadLetter: { queueUrl: deadLetterUrl },
      },
      async () => {},
    );
    poller.on('settled', ({ decision }) => {
      if (decision.action === 'delete') sdk.settled();
    });
    await poller.start();
    const sdkSettled = await sdk.done;
    await poller.stop();
    return row('SQS', `concurrency ${CONCURRENCY}`, messages, {
      bare: bareSettled,
      scripts: scriptsSettled,
      sdk: sdkSettled,
    });
  } finally {
    for (const url of urls) await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
    sqs.destroy();
    child?.kill('SIGKILL');
  }
}
