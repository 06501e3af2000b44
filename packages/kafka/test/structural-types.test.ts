/**
 * Type-level checks (run by `tsc -b test`, the package's typecheck): the wrappers accept KafkaJS's own
 * objects, and a minimal structural model of the KafkaJS-compatible API of `@confluentinc/kafka-javascript`
 * (its `types/kafkajs.d.ts`: `EachBatchPayload` without `uncommittedOffsets`, `commitOffsetsIfNecessary()`
 * without arguments). That package cannot be installed on this machine (its install downloads a prebuilt
 * librdkafka binary from GitHub, and the registry tarball carries no sources to build from), so its shape
 * is modelled here instead of imported.
 */
import { Idempotency, MemoryIdempotencyStore } from '@idempotent-consumer/core';
import type { Consumer, EachBatchHandler, EachMessageHandler, Producer } from 'kafkajs';
import { idempotentEachBatch, idempotentEachMessage } from '../src';

/** The parts of `@confluentinc/kafka-javascript`'s `KafkaJS` types the wrappers meet. */
declare namespace ConfluentKafkaJS {
  interface IHeaders {
    [key: string]: Buffer | string | (Buffer | string)[] | undefined;
  }
  interface KafkaMessage {
    key: Buffer | null;
    value: Buffer | null;
    timestamp: string;
    attributes: number;
    offset: string;
    headers: IHeaders;
    leaderEpoch?: number;
  }
  interface EachMessagePayload {
    topic: string;
    partition: number;
    message: KafkaMessage;
    heartbeat(): Promise<void>;
    pause(): () => void;
  }
  interface EachBatchPayload {
    batch: {
      topic: string;
      partition: number;
      highWatermark: string;
      messages: KafkaMessage[];
      isEmpty(): boolean;
      firstOffset(): string | null;
      lastOffset(): string;
    };
    resolveOffset(offset: string): void;
    heartbeat(): Promise<void>;
    pause(): () => void;
    commitOffsetsIfNecessary(): Promise<void>;
    isRunning(): boolean;
    isStale(): boolean;
  }
  interface Consumer {
    pause(topics: Array<{ topic: string; partitions?: number[] }>): void;
    resume(topics: Array<{ topic: string; partitions?: number[] }>): void;
  }
  interface Producer {
    send(record: {
      topic: string;
      messages: { key?: Buffer | string | null; value: Buffer | string | null; headers?: IHeaders }[];
    }): Promise<unknown[]>;
  }
}

describe('structural typing', () => {
  const idempotency = new Idempotency({ store: new MemoryIdempotencyStore() });

  it('fits KafkaJS', () => {
    const consumer = {} as Consumer;
    const producer = {} as Producer;
    const eachMessage: EachMessageHandler = idempotentEachMessage(
      { idempotency, consumer, producer },
      { groupId: 'g' },
      () => 1,
    );
    const eachBatch: EachBatchHandler = idempotentEachBatch(
      { idempotency, consumer, producer },
      { groupId: 'g' },
      () => 1,
    );
    expect(typeof eachMessage).toBe('function');
    expect(typeof eachBatch).toBe('function');
  });

  it("fits @confluentinc/kafka-javascript's KafkaJS-compatible API", () => {
    const consumer = {} as ConfluentKafkaJS.Consumer;
    const producer = {} as ConfluentKafkaJS.Producer;
    const eachMessage: (p: ConfluentKafkaJS.EachMessagePayload) => Promise<void> = idempotentEachMessage(
      { idempotency, consumer, producer },
      { groupId: 'g' },
      () => 1,
    );
    const eachBatch: (p: ConfluentKafkaJS.EachBatchPayload) => Promise<void> = idempotentEachBatch(
      { idempotency, consumer, producer },
      { groupId: 'g' },
      () => 1,
    );
    expect(typeof eachMessage).toBe('function');
    expect(typeof eachBatch).toBe('function');
  });
});
