import { randomUUID } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';

/**
 * An SQS client for the emulator or LocalStack at `endpoint`: a fixed region, dummy credentials, and
 * `useQueueUrlAsEndpoint: false` so every request goes to `endpoint` whatever host the queue URL names.
 */
export function sqsClient(endpoint: string): SQSClient {
  return new SQSClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    useQueueUrlAsEndpoint: false,
    maxAttempts: 2,
  });
}

/** A unique queue name with a readable prefix (`.fifo` appended for FIFO queues). */
export function uniqueQueueName(prefix: string, fifo = false): string {
  return `${prefix}-${randomUUID().slice(0, 8)}${fifo ? '.fifo' : ''}`;
}

/** Creates a queue and returns its URL and ARN. */
export async function createQueue(
  sqs: SQSClient,
  name: string,
  attributes: Record<string, string> = {},
): Promise<{ url: string; arn: string }> {
  const fifo = name.endsWith('.fifo') ? { FifoQueue: 'true' } : {};
  const created = await sqs.send(
    new CreateQueueCommand({ QueueName: name, Attributes: { ...fifo, ...attributes } }),
  );
  const url = created.QueueUrl!;
  const attrs = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }),
  );
  return { url, arn: attrs.Attributes!.QueueArn! };
}

/** Deletes queues, ignoring errors. */
export async function deleteQueues(sqs: SQSClient, urls: readonly string[]): Promise<void> {
  await Promise.allSettled(urls.map((u) => sqs.send(new DeleteQueueCommand({ QueueUrl: u }))));
}

/** Sends a message with an `idempotency-key` attribute (when given). FIFO queues need `groupId`. */
export async function sendMessage(
  sqs: SQSClient,
  queueUrl: string,
  body: string,
  options: { key?: string; groupId?: string; deduplicationId?: string } = {},
): Promise<string> {
  const out = await sqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: body,
      MessageAttributes: options.key
        ? { 'idempotency-key': { DataType: 'String', StringValue: options.key } }
        : undefined,
      MessageGroupId: options.groupId,
      MessageDeduplicationId: options.deduplicationId ?? (options.groupId ? randomUUID() : undefined),
    }),
  );
  return out.MessageId!;
}

/** Visible + in-flight + delayed message counts of a queue (approximate, as SQS reports them). */
export async function queueDepth(sqs: SQSClient, queueUrl: string): Promise<number> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesNotVisible',
        'ApproximateNumberOfMessagesDelayed',
      ],
    }),
  );
  const a = out.Attributes ?? {};
  return (
    Number(a.ApproximateNumberOfMessages ?? 0) +
    Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
    Number(a.ApproximateNumberOfMessagesDelayed ?? 0)
  );
}

/** One receive of up to 10 messages with all attributes (for inspecting a dead-letter queue). */
export async function receiveAll(sqs: SQSClient, queueUrl: string, waitTimeSeconds = 1): Promise<Message[]> {
  const out = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: waitTimeSeconds,
      MessageAttributeNames: ['All'],
      MessageSystemAttributeNames: ['All'],
    }),
  );
  return out.Messages ?? [];
}

/**
 * The emulator's client, except that every command of class `blackHoled` goes to a client of `hole` (the
 * same SDK, its options such as `abortSignal` passed on): SQS that never answers that one kind of request.
 */
export function blackHoling(
  sqs: SQSClient,
  hole: SQSClient,
  blackHoled: abstract new (...args: never[]) => unknown,
) {
  return {
    send: (command: unknown, options?: unknown) =>
      ((command instanceof blackHoled ? hole : sqs).send as (c: unknown, o?: unknown) => Promise<unknown>)(
        command,
        options,
      ),
  } as unknown as SQSClient;
}
