import { InvalidOptionError } from '@idempotent-consumer/core';
import type { KafkaIdempotencyDependencies } from './dependencies';
import type { KafkaHandler } from './handler';
import { MessageProcessor } from './message-processor';
import { type KafkaIdempotencyOptions, type ResolvedKafkaOptions, resolveKafkaOptions } from './options';
import { PartitionPauser } from './partition-pauser';

/** What both wrappers are built from: the resolved options, the message processor and the partition pauser. */
export interface WrapperParts<T> {
  readonly resolved: ResolvedKafkaOptions;
  readonly processor: MessageProcessor<T>;
  readonly pauser: PartitionPauser;
}

/**
 * Checks a wrapper's arguments and builds its parts (shared by `idempotentEachMessage` and
 * `idempotentEachBatch`).
 * @param wrapper - the wrapper's name, for error messages.
 * @throws {@link InvalidOptionError} when a dependency or the handler is missing, or an option is invalid.
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
  const resolved = resolveKafkaOptions(options, dependencies.producer !== undefined);
  return {
    resolved,
    processor: new MessageProcessor(dependencies.idempotency, dependencies.producer, resolved, handler),
    pauser: new PartitionPauser(dependencies.consumer, resolved.onEvent),
  };
}
