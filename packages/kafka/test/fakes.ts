import type {
  EachBatchPayloadLike,
  EachMessagePayloadLike,
  KafkaHeaders,
  KafkaMessageLike,
  ProducedMessageLike,
  TopicPartitionsLike,
} from '../src';

/** A consumer that records pause/resume calls. */
export class FakeConsumer {
  readonly calls: { method: 'pause' | 'resume'; topics: TopicPartitionsLike[] }[] = [];
  pause(topics: TopicPartitionsLike[]): void {
    this.calls.push({ method: 'pause', topics });
  }
  resume(topics: TopicPartitionsLike[]): void {
    this.calls.push({ method: 'resume', topics });
  }
}

/** A producer that records what it sent, or fails when told to. */
export class FakeProducer {
  readonly sent: { topic: string; messages: ProducedMessageLike[] }[] = [];
  failNext = false;
  async send(record: { topic: string; messages: ProducedMessageLike[] }): Promise<void> {
    if (this.failNext) {
      this.failNext = false;
      throw new Error('broker unreachable');
    }
    this.sent.push(record);
  }
}

export function message(offset: number, value: string, headers: KafkaHeaders = {}): KafkaMessageLike {
  return {
    offset: String(offset),
    key: null,
    value: Buffer.from(value),
    timestamp: '1700000000000',
    headers,
  };
}

export function messagePayload(
  topic: string,
  partition: number,
  m: KafkaMessageLike,
): EachMessagePayloadLike {
  return { topic, partition, message: m, heartbeat: async () => {} };
}

export function batchPayload(
  topic: string,
  partition: number,
  messages: KafkaMessageLike[],
  state: { stale?: () => boolean } = {},
): EachBatchPayloadLike & { resolved: string[] } {
  const resolved: string[] = [];
  return {
    batch: { topic, partition, messages },
    resolved,
    resolveOffset: (offset) => {
      resolved.push(offset);
    },
    heartbeat: async () => {},
    commitOffsetsIfNecessary: async () => {},
    isRunning: () => true,
    isStale: () => state.stale?.() ?? false,
  };
}
