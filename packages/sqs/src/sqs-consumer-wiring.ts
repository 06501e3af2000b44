import {
  ChangeMessageVisibilityCommand,
  type Message,
  type MessageSystemAttributeName,
} from '@aws-sdk/client-sqs';
import { InvalidOptionError, StoreUnavailableError } from '@idempotent-consumer/core';
import { AdapterLog, StopSignal, StoreGate, TypedEventEmitter } from '@idempotent-consumer/core/kit';
import { processBatch } from './batch-processing';
import type { SqsIdempotencyEvents } from './events';
import type { SqsHandler } from './handler';
import { RECEIVED_MESSAGE_ATTRIBUTES, RECEIVED_SYSTEM_ATTRIBUTES } from './message-attributes';
import { SqsMessagePort } from './message-port';
import { resolveSqsOptions, type SqsIdempotencyOptions } from './options';
import type { ProcessedMessage } from './processed';
import { reportProcessed, sourceOf, sqsRequestOf } from './report';
import { visibilityBatcher } from './sqs-batcher';
import { abortableBy, type SqsIdempotencyDependencies } from './sqs-client';

/** Options of {@link createSqsConsumerWiring}. */
export interface SqsConsumerWiringOptions extends SqsIdempotencyOptions {
  /**
   * `false`: the wiring has a `handleMessage` (one message per call); `true`: a `handleMessageBatch`
   * (the received batch claimed in one round trip, `Idempotency.claimMany`; standard-queue messages run
   * concurrently and each FIFO message group in order). @defaultValue false
   */
  readonly batch?: boolean;
}

/**
 * The sqs-consumer (v11+) options that make a `Consumer` effectively once: spread it into
 * `Consumer.create({ ...wiring, queueUrl, sqs })`. Its own (enumerable) fields are exactly the Consumer
 * options it sets; `events`, `verifyDeadLetter`, `checkStore` and `close` are on the prototype, so spreading leaves
 * them out.
 */
export interface SqsConsumerWiring {
  /** The message handler (`batch: false`). Resolves the message to delete, `undefined` to leave it. */
  readonly handleMessage?: (message: Message) => Promise<Message | undefined>;
  /** The batch handler (`batch: true`). Resolves with exactly the messages to delete. */
  readonly handleMessageBatch?: (messages: Message[]) => Promise<Message[]>;
  /**
   * Fail closed: resolves at once while the store answers; after a message found it unavailable, resolves
   * once a ping succeeds, so the Consumer receives nothing meanwhile, and rejects with a
   * `StoreUnavailableError` when {@link SqsConsumerWiring.close} ends that wait first (the stopped
   * Consumer's last poll then receives nothing; sqs-consumer reports it as one receive `error`). It first awaits the dead-letter check
   * ({@link SqsConsumerWiring.verifyDeadLetter}) and rejects with its error, so a Consumer whose
   * dead-letter mode cannot work receives nothing (sqs-consumer reports the rejection as an `error` event
   * and polls again).
   */
  readonly preReceiveMessageCallback: () => Promise<void>;
  /** `['All']`: the `idempotency-key` attribute (and every other) is received. */
  readonly messageAttributeNames: string[];
  /** `ApproximateReceiveCount` (retry backoff, redrive) and `MessageGroupId` (FIFO order). */
  readonly messageSystemAttributeNames: MessageSystemAttributeName[];
  /** The events of every message ({@link SqsIdempotencyEvents}; not `received`, `started`, `stopped`: sqs-consumer has its own). */
  readonly events: TypedEventEmitter<SqsIdempotencyEvents>;
  /**
   * Releases what the wiring holds outside the Consumer: detaches its logger from the runner, stops
   * watching the Redis client's errors, stops the store gate's probe (a `preReceiveMessageCallback` waiting
   * for the store to answer then rejects: nothing is received), and aborts the SQS requests the
   * wiring sends itself, in flight or later: the dead-letter check (`GetQueueAttributes`; the
   * `preReceiveMessageCallback` awaiting it then rejects), the dead-letter copy (`SendMessage`) and the
   * visibility changes (`ChangeMessageVisibility`, `ChangeMessageVisibilityBatch`: retry backoff, CONFLICT
   * delay, lease heartbeat). It also ends a CONFLICT wait for the key's holder (`conflictWaitMs`; the message
   * settles as a CONFLICT still held), starts no further handler (a message whose turn comes later, such
   * as a FIFO message behind its group in a batch, is not run: the claim it got is given back, and it comes
   * back when its visibility timeout lapses) and aborts the `signal` of an unprotected handler (outcome
   * `UNPROTECTED`, which holds no claim), as the poller's `stop()` does, so neither holds the Consumer's
   * last poll. An SQS endpoint that never answers one would otherwise hold the Consumer's last
   * poll (its `stopped` waits up to `pollingCompleteWaitTimeMs` for it) and a socket for up to the SDK's
   * socket timeout. An aborted request is a `brokerError`; its message is not deleted (an aborted copy
   * leaves it `dead-letter-failed`) and comes back when the visibility timeout it has lapses.
   * Call it after the Consumer's `stop()`; a wiring is not used after `close()`. Safe to call twice.
   */
  close(): void;
  /**
   * Checks, once, that the dead-letter mode can work (`GetQueueAttributes`): with
   * `deadLetter: 'redrive-policy'` (the default) the queue must have a `RedrivePolicy`, with `{ queueUrl }`
   * that queue must exist. The pre-receive callback runs it anyway; await it before `Consumer.start()` to
   * refuse to start on a bad setup instead of polling with errors.
   * @throws {@link @idempotent-consumer/core!TopologyMismatchError} (`TOPOLOGY_MISMATCH`) when it cannot work;
   * {@link SqsOperationError} when SQS did not answer.
   */
  verifyDeadLetter(): Promise<void>;
  /**
   * Sends one ping to the idempotency store (bounded by its command timeout). Await it (with
   * {@link SqsConsumerWiring.verifyDeadLetter}) before `Consumer.start()` to refuse to start against a store
   * that does not answer. The same check as the poller's and the other adapters' `checkStore()`.
   * @throws {@link @idempotent-consumer/core!StoreUnavailableError} naming the queue and where Redis is (host and port).
   */
  checkStore(): Promise<void>;
}

/**
 * Makes the options of an effectively-once sqs-consumer `Consumer`: the handler wrapped per the outcome
 * mapping (docs/design.md#outcome-to-broker-action, SQS column), the fail-closed
 * `preReceiveMessageCallback`, and the attribute names to request. sqs-consumer deletes a message when the
 * handler resolves with it and leaves it when it does not; the wiring resolves it for completed, duplicate,
 * unprotected and dead-lettered (copy sent) messages, and sets the visibility timeout itself otherwise
 * (conflict, retry, FIFO-blocked, redrive policy). It never rejects, so sqs-consumer's
 * `terminateVisibilityTimeout` never overrides those changes. While the handler runs, each lease heartbeat
 * extends the message's visibility timeout.
 *
 * @example
 * ```ts
 * const wiring = createSqsConsumerWiring({ idempotency, sqs }, { queueUrl, deadLetter: { queueUrl: dlqUrl } },
 *   async ({ message, fencingToken }) => charge(JSON.parse(message.Body!), fencingToken));
 * await wiring.checkStore();
 * await wiring.verifyDeadLetter();
 * Consumer.create({ ...wiring, queueUrl, sqs }).start();
 * ```
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when a dependency is missing or an option is out of range.
 */
export function createSqsConsumerWiring<T>(
  dependencies: SqsIdempotencyDependencies,
  options: SqsConsumerWiringOptions,
  handler: SqsHandler<T>,
): SqsConsumerWiring {
  if (!dependencies?.idempotency || !dependencies.sqs) {
    throw new InvalidOptionError('createSqsConsumerWiring needs { idempotency, sqs }');
  }
  if (typeof handler !== 'function') throw new InvalidOptionError('handler must be a function');
  const resolved = resolveSqsOptions(options);
  const { queueUrl, scope } = resolved;
  const events = new TypedEventEmitter<SqsIdempotencyEvents>();
  const log = AdapterLog.for(dependencies.idempotency, dependencies.logger, `the consumer of ${queueUrl}`, {
    queueUrl,
  });
  // Until close(): the runner's warnings reach this wiring's logger and the Redis client is watched.
  log.open();
  const unwatchRedis = StoreGate.watchRedisErrors(dependencies.idempotency.store, log);
  // Aborted by close(): the wiring's own SQS requests (dead-letter check and copy, visibility changes),
  // which SQS may never answer.
  const closing = new StopSignal();
  const brokerError = (operation: string, error: unknown, message: Message) =>
    events.emit('brokerError', { queueUrl, operation, error, source: sourceOf(queueUrl, message) });
  const setVisibility = async (message: Message, seconds: number) => {
    if (!message.ReceiptHandle) return;
    try {
      await dependencies.sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: queueUrl,
          ReceiptHandle: message.ReceiptHandle,
          VisibilityTimeout: seconds,
        }),
        abortableBy(closing.signal),
      );
    } catch (error) {
      brokerError('ChangeMessageVisibility', error, message);
    }
  };
  const gate = new StoreGate(
    dependencies.idempotency.store,
    { storeProbeBackoff: resolved.storeProbeBackoff, log },
    {
      onStoreUnavailable: ({ error }) => events.emit('storeUnavailable', { queueUrl, error }),
      onStoreRecovered: ({ downMs }) => events.emit('storeRecovered', { queueUrl, downMs }),
    },
  );
  // An extension or a write after a handler the store does not answer closes the gate at once.
  const unfollowStore = gate.follow(dependencies.idempotency);
  const port = new SqsMessagePort<T>(dependencies, resolved, handler, {
    changeVisibility: setVisibility,
    onError: brokerError,
    emit: (name, ...payload) => void events.emit(name, ...payload),
    log,
    gate,
    closing: () => closing.signal,
    // close() ends a CONFLICT wait and aborts the signal of an unprotected handler, as the poller's stop().
    stopping: closing.signal,
  });
  const report = (processed: ProcessedMessage<T>) => {
    reportProcessed(events, queueUrl, scope, processed);
    const { decision, message } = processed;
    if (decision.action === 'leave' && decision.reason === 'store-unavailable') {
      // Visible again once the store answers: it runs then, not when its visibility timeout lapses.
      void gate.waitUntilOpen(closing.signal).then((open) => (open ? setVisibility(message, 0) : undefined));
    }
  };

  const wiring: Record<string, unknown> = {};
  if (options.batch) {
    const visibility = visibilityBatcher(dependencies.sqs, queueUrl, 5, closing.signal);
    wiring.handleMessageBatch = async (messages: Message[]): Promise<Message[]> => {
      const toDelete: Message[] = [];
      const changes: Promise<void>[] = [];
      await processBatch(port, messages, (processed) => {
        const request = sqsRequestOf(processed);
        const { message } = processed;
        if (request === 'delete') {
          toDelete.push(message);
          report(processed);
        } else if (request !== undefined && message.ReceiptHandle) {
          changes.push(
            visibility
              .add({ ReceiptHandle: message.ReceiptHandle, VisibilityTimeout: request })
              .catch((error) => brokerError('ChangeMessageVisibilityBatch', error, message))
              .then(() => report(processed)),
          );
        } else report(processed);
      });
      await Promise.all(changes);
      return toDelete;
    };
  } else {
    wiring.handleMessage = async (message: Message): Promise<Message | undefined> => {
      const [processed] = await processBatch(port, [message], () => {});
      const request = sqsRequestOf(processed!);
      if (typeof request === 'number') await setVisibility(message, request);
      report(processed!);
      return request === 'delete' ? message : undefined;
    };
  }
  wiring.preReceiveMessageCallback = async () => {
    await port.verifyDeadLetter(closing.signal);
    // `false`: close() disposed the gate while the store was down. Still fail closed: the Consumer's last
    // poll must not receive (and so hide, and count a receive of) messages nothing can process.
    if (!(await gate.waitUntilOpen())) {
      throw new StoreUnavailableError(
        `${log.where} was closed while the idempotency store did not answer: nothing is received`,
      );
    }
  };
  wiring.messageAttributeNames = [...RECEIVED_MESSAGE_ATTRIBUTES];
  wiring.messageSystemAttributeNames = [...RECEIVED_SYSTEM_ATTRIBUTES];
  const hidden = Object.create({
    get events() {
      return events;
    },
    async verifyDeadLetter() {
      await port.verifyDeadLetter(closing.signal);
    },
    checkStore() {
      return StoreGate.check(dependencies.idempotency.store, log.where);
    },
    close() {
      closing.abort();
      gate.dispose();
      unfollowStore();
      unwatchRedis();
      log.close();
    },
  }) as object;
  return Object.assign(hidden, wiring) as unknown as SqsConsumerWiring;
}
