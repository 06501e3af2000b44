import { setTimeout as delay } from 'node:timers/promises';
import type { KafkaIdempotencyEvent, PauseReason } from './events';
import type { ConsumerLike } from './types';

/**
 * Pauses partitions of a consumer and resumes them later (KafkaJS `consumer.pause` / `consumer.resume`,
 * "Pause & Resume" in its docs): one partition for a backoff, or whole topics until the idempotency store
 * answers again. A paused partition keeps its fetch position, so its unresolved message is fetched again
 * after the resume. Timers are unref'd; errors of `pause`/`resume` (a consumer that disconnected meanwhile)
 * are reported as `error` events, never thrown from a timer.
 */
export class PartitionPauser {
  readonly #timers = new Map<string, { timer: NodeJS.Timeout; topic: string; partition: number }>();
  readonly #storeWaitTopics = new Set<string>();
  #probing: Promise<void> | undefined;
  #closed = false;

  constructor(
    private readonly consumer: ConsumerLike,
    private readonly onEvent: (event: KafkaIdempotencyEvent) => void,
  ) {}

  /** Pauses one partition and resumes it after `delayMs` milliseconds. */
  pauseFor(topic: string, partition: number, offset: string, delayMs: number, reason: PauseReason): void {
    const id = `${partition}:${topic}`;
    clearTimeout(this.#timers.get(id)?.timer);
    this.#call('pause', [{ topic, partitions: [partition] }]);
    this.onEvent({ type: 'paused', topic, partition, offset, reason, delayMs });
    const timer = setTimeout(() => {
      this.#timers.delete(id);
      if (this.#storeWaitTopics.has(topic)) return; // the store watcher resumes the whole topic
      if (this.#call('resume', [{ topic, partitions: [partition] }])) {
        this.onEvent({ type: 'resumed', topic, partition });
      }
    }, delayMs);
    timer.unref();
    this.#timers.set(id, { timer, topic, partition });
  }

  /**
   * Pauses every partition of `topic` (fail closed: the store does not answer) until `probe` resolves,
   * tried every `intervalMs`; then resumes the topic, keeping partitions whose own backoff still runs
   * paused. One watcher serves every topic.
   */
  pauseUntil(topic: string, offset: string, probe: () => Promise<unknown>, intervalMs: number): void {
    this.#call('pause', [{ topic }]);
    this.onEvent({
      type: 'paused',
      topic,
      partition: undefined,
      offset,
      reason: 'store-unavailable',
      delayMs: undefined,
    });
    this.#storeWaitTopics.add(topic);
    this.#probing ??= this.#watch(probe, intervalMs).finally(() => {
      this.#probing = undefined;
    });
  }

  /** Stops the timers (the consumer is going away); nothing is resumed. */
  close(): void {
    this.#closed = true;
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    this.#storeWaitTopics.clear();
  }

  async #watch(probe: () => Promise<unknown>, intervalMs: number): Promise<void> {
    for (;;) {
      await delay(intervalMs, undefined, { ref: false });
      if (this.#closed) return;
      try {
        await probe();
      } catch {
        continue;
      }
      if (this.#closed) return;
      const topics = [...this.#storeWaitTopics];
      this.#storeWaitTopics.clear();
      for (const topic of topics) {
        if (!this.#call('resume', [{ topic }])) continue;
        const stillPaused = [...this.#timers.values()]
          .filter((t) => t.topic === topic)
          .map((t) => t.partition);
        if (stillPaused.length > 0) this.#call('pause', [{ topic, partitions: stillPaused }]);
        this.onEvent({ type: 'resumed', topic, partition: undefined });
      }
      return;
    }
  }

  #call(method: 'pause' | 'resume', topics: { topic: string; partitions?: number[] }[]): boolean {
    try {
      this.consumer[method](topics);
      return true;
    } catch (error) {
      this.onEvent({ type: 'error', operation: method, error });
      return false;
    }
  }
}
