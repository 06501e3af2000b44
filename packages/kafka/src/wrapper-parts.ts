import { InvalidOptionError } from '@idempotent-consumer/core';
import { AdapterLog, StopSignal, StoreGate } from '@idempotent-consumer/core/kit';
import type { KafkaIdempotencyDependencies } from './dependencies';
import { KafkaEventEmitter } from './events';
import type { KafkaHandler } from './handler';
import { type Delivery, KafkaPort } from './kafka-port';
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
  /**
   * Ends inline waits (`stopping`), the gate's probe loop and the pauser's timers, stops listening to the
   * Redis client and detaches the logger (the consumer is going away).
   */
  readonly close: () => void;
  /**
   * Aborted by `close()`: every inline wait (conflict, retry, store, completion write, dead-letter produce)
   * ends.
   */
  readonly stopping: AbortSignal;
  /** Where the wrapper's warnings go. */
  readonly log: AdapterLog;
  /** One ping to the store; see `IdempotentEachMessage.checkStore`. */
  readonly checkStore: () => Promise<void>;
  /**
   * The first call checks the store once (`checkStore`, not awaited by the wrappers) and logs a failure
   * as an error with where Redis is; the message meets the store as it is (fail closed). Later calls do
   * nothing. Never rejects.
   */
  readonly checkStoreOnFirstUse: () => Promise<void>;
  readonly port: KafkaPort<T>;
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
  const { resolved, topicOf } = withTopicOfScope(
    resolveKafkaOptions(options ?? {}, dependencies.producer !== undefined),
  );
  const events = new KafkaEventEmitter();
  const pauser = new PartitionPauser(dependencies.consumer, events);
  const groupId = typeof options?.groupId === 'string' ? options.groupId : undefined;
  const log = AdapterLog.for(
    dependencies.idempotency,
    dependencies.logger,
    groupId === undefined ? wrapper : `${wrapper} of group ${groupId}`,
    groupId === undefined ? {} : { groupId },
  );
  // A wrapper has no start: the runner's warnings reach its logger from now until close().
  log.open();
  const unwatchRedis = StoreGate.watchRedisErrors(dependencies.idempotency.store, log);
  const stopping = new StopSignal();
  const gate = new StoreGate(
    dependencies.idempotency.store,
    { storeProbeBackoff: resolved.storeProbeBackoff, log },
    {
      // Reported for a message's store call; a give-back closing the gate names none.
      onStoreUnavailable: ({ error, about }) => {
        const delivery = about as Delivery | undefined;
        if (delivery?.topic === undefined) return;
        events.emit('storeUnavailable', { topic: delivery.topic, partition: delivery.partition, error });
      },
      onStoreRecovered: ({ downMs }) => {
        events.emit('storeRecovered', { topics: pauser.resumeStoreTopics(), downMs });
      },
    },
  );
  const { idempotency, producer } = dependencies;
  // A write after a handler, or a lease extension, that goes unanswered closes the gate at once: the
  // outage is reported then, for the topic of the message whose call failed, not once the runner gave up.
  const unfollowStore = gate.follow(idempotency, (error, subject) => {
    const topic = topicOf(subject.scope);
    if (topic !== undefined) events.emit('storeUnavailable', { topic, partition: undefined, error });
  });
  const checkStore = () => StoreGate.check(idempotency.store, log.where);
  let firstUse: Promise<void> | undefined;
  return {
    resolved,
    events,
    gate,
    stopping: stopping.signal,
    log,
    checkStore,
    checkStoreOnFirstUse: () =>
      (firstUse ??= checkStore().catch((error: unknown) => {
        log.error(error instanceof Error ? error.message : String(error), { error });
      })),
    close: () => {
      stopping.abort();
      gate.dispose();
      pauser.close();
      unfollowStore();
      unwatchRedis();
      log.close();
    },
    port: new KafkaPort({
      idempotency,
      producer,
      options: resolved,
      handler,
      events,
      gate,
      log,
      stopping: stopping.signal,
    }),
    pauser,
  };
}

/**
 * `resolved` whose `scopeOf` remembers the topic it last made each scope for, and `topicOf`, which reads
 * it back: the runner's events name a record's scope, the wrapper's events a topic.
 */
function withTopicOfScope(resolved: ResolvedKafkaOptions): {
  resolved: ResolvedKafkaOptions;
  topicOf: (scope: string) => string | undefined;
} {
  const topics = new Map<string, string>();
  const { scopeOf } = resolved;
  return {
    resolved: {
      ...resolved,
      scopeOf: (topic) => {
        const scope = scopeOf(topic);
        if (topics.get(scope) !== topic) topics.set(scope, topic);
        return scope;
      },
    },
    topicOf: (scope) => topics.get(scope),
  };
}
