import { InvalidOptionError } from '@idempotent-consumer/core';
import { StoreGate } from '@idempotent-consumer/core/kit';
import type { KafkaIdempotencyDependencies } from './dependencies';
import { KafkaEventEmitter } from './events';
import type { KafkaHandler } from './handler';
import { MessageProcessor } from './message-processor';
import { type KafkaIdempotencyOptions, type ResolvedKafkaOptions, resolveKafkaOptions } from './options';
import { PartitionPauser } from './partition-pauser';

/**
 * What both wrappers are built from: the resolved options, the event emitter, the store gate, the message
 * processor and the partition pauser.
 */
export interface WrapperParts<T> {
  readonly resolved: ResolvedKafkaOptions;
  readonly events: KafkaEventEmitter;
  /** Closed while the store does not answer; its one probe loop resumes the paused topics. */
  readonly gate: StoreGate;
  /** Ends the gate's probe loop and the pauser's timers (the consumer is going away). */
  readonly close: () => void;
  readonly processor: MessageProcessor<T>;
  readonly pauser: PartitionPauser;
}

/**
 * Checks a wrapper's arguments and builds its parts (shared by `idempotentEachMessage` and
 * `idempotentEachBatch`).
 * @param wrapper - the wrapper's name, for error messages.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when a dependency or the handler is missing, or an option is invalid.
 */
export function buildWrapperParts<T>(
  wrapper: string,
  dependencies: KafkaIdempotencyDependencies,
  options: KafkaIdempotencyOptions,
  handler: KafkaHandler<T>,
): WrapperParts<T> {
  if (!dependencies?.idempotency || !dependencies.consumer) {
    throw new InvalidOptionError(`${wrapper} needs { idempotency, consumer }`);
  }
  if (typeof handler !== 'function') throw new InvalidOptionError(`${wrapper} needs a handler`);
  const resolved = resolveKafkaOptions(options ?? {}, dependencies.producer !== undefined);
  const events = new KafkaEventEmitter();
  const pauser = new PartitionPauser(dependencies.consumer, events);
  const gate = new StoreGate(
    dependencies.idempotency.store,
    { storeProbeBackoff: resolved.storeProbeBackoff },
    {
      onStoreRecovered: ({ downMs }) => {
        events.emit('storeRecovered', { topics: pauser.resumeStoreTopics(), downMs });
      },
    },
  );
  const { idempotency, producer } = dependencies;
  return {
    resolved,
    events,
    gate,
    close: () => {
      gate.dispose();
      pauser.close();
    },
    processor: new MessageProcessor(idempotency, producer, resolved, handler, events, gate),
    pauser,
  };
}
