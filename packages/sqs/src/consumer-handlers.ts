import {
  ChangeMessageVisibilityCommand,
  type Message,
  type MessageSystemAttributeName,
} from '@aws-sdk/client-sqs';
import { InvalidOptionError } from '@idempotent-consumer/core';
import { processBatch } from './batch-processing';
import type { ProcessedMessage } from './disposition';
import { SqsMessageProcessor } from './message-processor';
import { resolveSqsOptions, type SqsIdempotencyOptions, type SqsMessageHandler } from './options';
import { visibilityBatcher } from './sqs-batcher';
import type { SqsClientLike, SqsDependencies } from './sqs-client';
import { StoreGate } from './store-gate';

/** Options of {@link idempotentHandleMessage} and {@link idempotentHandleMessageBatch}. */
export interface SqsConsumerWrapperOptions extends SqsIdempotencyOptions {
  /**
   * Called for every processed message with what happened to it (outcome, disposition, error), for logs
   * and metrics. A listener that throws is ignored.
   */
  readonly onProcessed?: (processed: ProcessedMessage<unknown>) => void;
  /** Called with SQS errors (a visibility change or dead-letter send that failed) and unexpected errors. */
  readonly onError?: (error: unknown, message: Message) => void;
  /** How often `waitForStore` pings the store while it is unavailable, in milliseconds. @defaultValue 1000 */
  readonly storeProbeIntervalMs?: number;
}

/**
 * What the wrappers add to the returned function: `waitForStore`, to pass as sqs-consumer's
 * `preReceiveMessageCallback` so that polling pauses while the store is unavailable (fail closed).
 */
export interface StoreAwareHandler {
  /**
   * Resolves at once while the store answers; after a message found it unavailable, resolves once a ping
   * succeeds. Pass it as `preReceiveMessageCallback` to `Consumer.create`.
   */
  waitForStore(): Promise<void>;
}

/** An sqs-consumer `handleMessage` returned by {@link idempotentHandleMessage}. */
export type IdempotentHandleMessage = ((message: Message) => Promise<Message | undefined>) &
  StoreAwareHandler;

/** An sqs-consumer `handleMessageBatch` returned by {@link idempotentHandleMessageBatch}. */
export type IdempotentHandleMessageBatch = ((messages: Message[]) => Promise<Message[]>) & StoreAwareHandler;

/**
 * Wraps a handler as an sqs-consumer (v11+) `handleMessage` that runs it effectively once per idempotency
 * key. sqs-consumer deletes a message when `handleMessage` resolves with it (same `MessageId`) and leaves
 * it when it resolves `undefined`, so the wrapper maps each outcome (DESIGN.md, SQS column) to:
 * - handler completed, DUPLICATE, dead-lettered: resolves the message (sqs-consumer deletes it);
 * - CONFLICT: sets the visibility timeout to the holder's remaining lease, resolves `undefined`;
 * - retryable handler error: releases the claim, sets the visibility timeout from a backoff on
 *   `ApproximateReceiveCount`, resolves `undefined`;
 * - attempts exhausted, non-retryable error, PAYLOAD_MISMATCH, missing key: records FAILED and sends the
 *   message to `deadLetter.queueUrl` (then resolves it, so it is deleted) or leaves it to the redrive policy;
 * - store unavailable: resolves `undefined` (the message stays invisible) and closes the gate of
 *   `waitForStore`.
 * It never rejects, so sqs-consumer's `terminateVisibilityTimeout` never overrides these visibility changes.
 * While the handler runs, each lease heartbeat also extends the message's visibility timeout.
 *
 * Configure the `Consumer` with `messageAttributeNames: ['All']` (for the `idempotency-key` attribute) and
 * `messageSystemAttributeNames: ['ApproximateReceiveCount', 'MessageGroupId']`
 * (see {@link SQS_CONSUMER_ATTRIBUTES}), and `preReceiveMessageCallback: handleMessage.waitForStore`.
 *
 * @example
 * ```ts
 * const handleMessage = idempotentHandleMessage({ idempotency, sqs }, { queueUrl, deadLetter: { queueUrl: dlqUrl } },
 *   async (message, { fencingToken }) => charge(JSON.parse(message.Body!), fencingToken));
 * Consumer.create({ queueUrl, sqs, handleMessage, preReceiveMessageCallback: handleMessage.waitForStore,
 *   ...SQS_CONSUMER_ATTRIBUTES }).start();
 * ```
 * @throws {@link InvalidOptionError} when a dependency is missing or an option is out of range.
 */
export function idempotentHandleMessage<T>(
  dependencies: SqsDependencies,
  options: SqsConsumerWrapperOptions,
  handler: SqsMessageHandler<T>,
): IdempotentHandleMessage {
  const { processor, gate, report, setVisibility } = setup(dependencies, options, handler);
  const handleMessage = async (message: Message): Promise<Message | undefined> => {
    const [processed] = await processBatch(processor, [message], () => {});
    report(processed!, gate);
    const d = processed!.disposition;
    if (d.action === 'delete') return message;
    if (d.action === 'change-visibility') await setVisibility(message, d.visibilityTimeoutSeconds);
    return undefined;
  };
  return Object.assign(handleMessage, { waitForStore: () => gate.waitUntilOpen() });
}

/**
 * Wraps a per-message handler as an sqs-consumer `handleMessageBatch`: the batch is claimed in one round
 * trip (`Idempotency.claimMany`), standard-queue messages run concurrently and each FIFO message group in
 * order; it resolves with the messages to delete (sqs-consumer deletes exactly those with
 * `DeleteMessageBatch`). Visibility changes for the others are sent with `ChangeMessageVisibilityBatch`.
 * The outcome mapping is that of {@link idempotentHandleMessage}. Never rejects.
 * @throws {@link InvalidOptionError} when a dependency is missing or an option is out of range.
 */
export function idempotentHandleMessageBatch<T>(
  dependencies: SqsDependencies,
  options: SqsConsumerWrapperOptions,
  handler: SqsMessageHandler<T>,
): IdempotentHandleMessageBatch {
  const { processor, gate, report, onError, resolved } = setup(dependencies, options, handler);
  const visibility = visibilityBatcher(dependencies.sqs, resolved.queueUrl, 5);
  const handleMessageBatch = async (messages: Message[]): Promise<Message[]> => {
    const toDelete: Message[] = [];
    const changes: Promise<void>[] = [];
    await processBatch(processor, messages, (processed) => {
      report(processed, gate);
      const d = processed.disposition;
      if (d.action === 'delete') toDelete.push(processed.message);
      else if (d.action === 'change-visibility' && processed.message.ReceiptHandle) {
        changes.push(
          visibility
            .add({
              ReceiptHandle: processed.message.ReceiptHandle,
              VisibilityTimeout: d.visibilityTimeoutSeconds,
            })
            .catch((error) => onError(error, processed.message)),
        );
      }
    });
    await Promise.all(changes);
    return toDelete;
  };
  return Object.assign(handleMessageBatch, { waitForStore: () => gate.waitUntilOpen() });
}

/**
 * The receive attributes the wrappers need from sqs-consumer: message attributes (the `idempotency-key`)
 * and the `ApproximateReceiveCount` and `MessageGroupId` system attributes. Spread into `Consumer.create`.
 */
export const SQS_CONSUMER_ATTRIBUTES: {
  readonly messageAttributeNames: string[];
  readonly messageSystemAttributeNames: MessageSystemAttributeName[];
} = {
  messageAttributeNames: ['All'],
  messageSystemAttributeNames: ['ApproximateReceiveCount', 'MessageGroupId'],
};

function setup<T>(
  dependencies: SqsDependencies,
  options: SqsConsumerWrapperOptions,
  handler: SqsMessageHandler<T>,
) {
  if (!dependencies?.idempotency || !dependencies.sqs) {
    throw new InvalidOptionError('the SQS wrappers need { idempotency, sqs }');
  }
  if (typeof handler !== 'function') throw new InvalidOptionError('handler must be a function');
  const resolved = resolveSqsOptions(options);
  const onError = (error: unknown, message: Message) => {
    try {
      options.onError?.(error, message);
    } catch {
      // A listener's bug must not change what happens to the message.
    }
  };
  const setVisibility = async (message: Message, seconds: number) => {
    try {
      await changeVisibility(dependencies.sqs, resolved.queueUrl, message, seconds);
    } catch (error) {
      onError(error, message);
    }
  };
  const processor = new SqsMessageProcessor<T>(dependencies, resolved, handler, {
    changeVisibility: setVisibility,
    onError,
  });
  const gate = new StoreGate(dependencies.idempotency.store, options.storeProbeIntervalMs ?? 1000);
  const report = (processed: ProcessedMessage<T>, g: StoreGate) => {
    if (processed.storeUnavailable) g.close(processed.error);
    try {
      options.onProcessed?.(processed);
    } catch {
      // isolated, as above
    }
  };
  return { processor, gate, report, onError, setVisibility, resolved };
}

async function changeVisibility(
  sqs: SqsClientLike,
  queueUrl: string,
  message: Message,
  visibilityTimeoutSeconds: number,
): Promise<void> {
  if (!message.ReceiptHandle) return;
  await sqs.send(
    new ChangeMessageVisibilityCommand({
      QueueUrl: queueUrl,
      ReceiptHandle: message.ReceiptHandle,
      VisibilityTimeout: visibilityTimeoutSeconds,
    }),
  );
}
