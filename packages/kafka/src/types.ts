/**
 * Structural types of the Kafka client objects the wrappers use. They are the subset of KafkaJS 2.x
 * (`types/index.d.ts`: `EachMessagePayload`, `EachBatchPayload`, `Consumer`, `Producer`) that both KafkaJS
 * and the KafkaJS-compatible API of `@confluentinc/kafka-javascript` (`KafkaJS.Kafka`) provide, so the same
 * wrappers accept either client without importing it.
 *
 * @packageDocumentation
 */

/** One header value as KafkaJS delivers it (`IHeaders`): bytes, text, or several of them. */
export type KafkaHeaderValue = Buffer | string | (Buffer | string)[] | undefined;

/** Message headers (`IHeaders` in KafkaJS). */
export interface KafkaHeaders {
  [name: string]: KafkaHeaderValue;
}

/** A consumed message (`KafkaMessage` in KafkaJS). */
export interface KafkaMessageLike {
  /** Offset in its partition, a decimal string (Kafka offsets are 64-bit). */
  readonly offset: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** Milliseconds since the epoch, a decimal string. */
  readonly timestamp?: string;
  readonly headers?: KafkaHeaders;
}

/** What the client passes to `eachMessage` (KafkaJS `EachMessagePayload`). */
export interface EachMessagePayloadLike {
  readonly topic: string;
  readonly partition: number;
  readonly message: KafkaMessageLike;
  /** Sends a group heartbeat when one is due; rejects when the group is rebalancing. */
  heartbeat(): Promise<void>;
}

/** A fetched batch of one partition (KafkaJS `Batch`). */
export interface BatchLike {
  readonly topic: string;
  readonly partition: number;
  readonly messages: readonly KafkaMessageLike[];
}

/** What the client passes to `eachBatch` (KafkaJS `EachBatchPayload`). */
export interface EachBatchPayloadLike {
  readonly batch: BatchLike;
  /** Marks `offset` consumed: the committed offset may move past it. */
  resolveOffset(offset: string): void;
  heartbeat(): Promise<void>;
  /** Commits the resolved offsets when the auto-commit interval or threshold is reached. */
  commitOffsetsIfNecessary(): Promise<void>;
  /** False once the consumer is stopping. */
  isRunning(): boolean;
  /** True when the batch is outdated (a seek or a rebalance happened since it was fetched). */
  isStale(): boolean;
}

/** A topic and some (or, without `partitions`, all) of its partitions, as `Consumer.pause` takes them. */
export interface TopicPartitionsLike {
  topic: string;
  partitions?: number[];
}

/**
 * The consumer the wrappers pause and resume (KafkaJS `Consumer`). A wrapper installs itself over its
 * `pause` and `resume` until its `close()`, to tell the application's pauses from its own: each call still
 * reaches the consumer's method, and the wrapper never resumes a partition the application paused.
 */
export interface ConsumerLike {
  /** Stops fetching from these partitions until `resume`; KafkaJS keeps their position. */
  pause(topics: TopicPartitionsLike[]): unknown;
  resume(topics: TopicPartitionsLike[]): unknown;
  /**
   * The partitions paused now, of those assigned (KafkaJS `consumer.paused()`). Optional: when present, a
   * partition it shows paused that the wrapper did not pause is taken for one the application paused, and
   * the wrapper never resumes it.
   */
  paused?(): TopicPartitionsLike[];
}

/** A message to produce (KafkaJS `Message`). */
export interface ProducedMessageLike {
  key?: Buffer | string | null;
  value: Buffer | string | null;
  headers?: KafkaHeaders;
}

/** The producer the wrappers send dead letters with (KafkaJS `Producer`). */
export interface ProducerLike {
  send(record: { topic: string; messages: ProducedMessageLike[] }): Promise<unknown>;
}
