import type { KafkaEventEmitter } from './events';
import type { ConsumerLike } from './types';

/**
 * Pauses partitions of a consumer and resumes them later (KafkaJS `consumer.pause` / `consumer.resume`,
 * "Pause & Resume" in its docs): one partition for a backoff, or whole topics until the idempotency store
 * answers again (the wrapper's `StoreGate` opens). A paused partition keeps its fetch position, so its unresolved message is fetched again
 * after the resume. Timers are unref'd; errors of `pause`/`resume` (a consumer that disconnected meanwhile)
 * are reported as `brokerError` events, never thrown from a timer.
 */
export class PartitionPauser {
  readonly #timers = new Map<string, { timer: NodeJS.Timeout; topic: string; partition: number }>();
  readonly #storeWaitTopics = new Set<string>();
  #closed = false;

  constructor(
    private readonly consumer: ConsumerLike,
    private readonly events: KafkaEventEmitter,
  ) {}

  /**
   * Pauses one partition and resumes it after `delayMs` milliseconds. While its topic is paused until the
   * store answers, the partition is paused with it already: only its timer is set, and
   * {@link PartitionPauser.resumeStoreTopics} keeps it paused while the timer runs.
   */
  pauseFor(topic: string, partition: number, delayMs: number): void {
    const id = `${partition}:${topic}`;
    clearTimeout(this.#timers.get(id)?.timer);
    // KafkaJS turns a topic's pause into that of the partitions named when some are paused
    // (`SubscriptionState.pause` clears `pauseAll`): pausing this one would resume every other partition
    // of the topic while the store still does not answer.
    if (!this.#storeWaitTopics.has(topic)) this.#call('pause', [{ topic, partitions: [partition] }]);
    const timer = setTimeout(() => {
      this.#timers.delete(id);
      if (this.#storeWaitTopics.has(topic)) return; // the store watcher resumes the whole topic
      this.#call('resume', [{ topic, partitions: [partition] }]);
    }, delayMs);
    timer.unref();
    this.#timers.set(id, { timer, topic, partition });
  }

  /**
   * Pauses every partition of `topic` (fail closed: the store does not answer) until
   * {@link PartitionPauser.resumeStoreTopics} (the store gate opened). When `storeAnswers()` already says
   * the store answers again (it recovered while the message was being given up on), resumes at once.
   */
  pauseUntilStoreAnswers(topic: string, storeAnswers: () => boolean): void {
    this.#call('pause', [{ topic }]);
    this.#storeWaitTopics.add(topic);
    if (storeAnswers()) this.resumeStoreTopics();
  }

  /**
   * Resumes every topic paused by {@link PartitionPauser.pauseUntilStoreAnswers}, keeping partitions
   * whose own backoff still runs paused.
   * @returns the topics resumed.
   */
  resumeStoreTopics(): string[] {
    if (this.#closed) return [];
    const topics = [...this.#storeWaitTopics];
    this.#storeWaitTopics.clear();
    return topics.filter((topic) => {
      if (!this.#call('resume', [{ topic }])) return false;
      const stillPaused = [...this.#timers.values()].filter((t) => t.topic === topic).map((t) => t.partition);
      if (stillPaused.length > 0) this.#call('pause', [{ topic, partitions: stillPaused }]);
      return true;
    });
  }

  /** Stops the timers (the consumer is going away); nothing is resumed. */
  close(): void {
    this.#closed = true;
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    this.#storeWaitTopics.clear();
  }

  #call(method: 'pause' | 'resume', topics: { topic: string; partitions?: number[] }[]): boolean {
    try {
      this.consumer[method](topics);
      return true;
    } catch (error) {
      this.events.emit('brokerError', { operation: method, error, source: undefined });
      return false;
    }
  }
}
