import { ApplicationPauses } from './application-pauses';
import type { KafkaEventEmitter } from './events';
import type { ConsumerLike } from './types';

/**
 * Pauses partitions of a consumer and resumes them later (KafkaJS `consumer.pause` / `consumer.resume`,
 * "Pause & Resume" in its docs): one partition for a backoff, or whole topics until the idempotency store
 * answers again (the wrapper's `StoreGate` opens). A paused partition keeps its fetch position, so its unresolved message is fetched again
 * after the resume. Timers are unref'd; errors of `pause`/`resume` (a consumer that disconnected meanwhile)
 * are reported as `brokerError` events, never thrown from a timer.
 *
 * It resumes only what it paused: a partition the application paused itself ({@link ApplicationPauses}:
 * its own `consumer.pause` calls, before or while the wrapper's pause lasts, and what `consumer.paused()`
 * shows paused that the wrapper did not pause) stays paused, and one the application resumed is not paused
 * again once the wrapper's pause ends. While a topic waits for the store, the application's calls on it
 * are recorded, and the whole topic is paused again at once: a partition it resumed meanwhile stays
 * paused until the store answers (its messages would only meet the outage again).
 */
export class PartitionPauser {
  readonly #timers = new Map<string, { timer: NodeJS.Timeout; topic: string; partition: number }>();
  /**
   * Partitions (`partition:topic`) this wrapper paused whose resume at the end of their backoff the consumer
   * refused (a `brokerError`): still this wrapper's pause, never taken for one the application made; the
   * next setting of the topic's pauses ({@link PartitionPauser.resumeStoreTopics}) resumes them.
   */
  readonly #unresumed = new Set<string>();
  readonly #storeWaitTopics = new Set<string>();
  readonly #application: ApplicationPauses;
  #closed = false;

  constructor(
    private readonly consumer: ConsumerLike,
    private readonly events: KafkaEventEmitter,
  ) {
    this.#application = new ApplicationPauses(consumer, (topics) => {
      for (const topic of topics) if (this.#pausesAny(topic)) this.#restoreOwnPauses(topic);
    });
  }

  /**
   * Pauses one partition and resumes it after `delayMs` milliseconds, unless the application paused it
   * meanwhile (or before). While its topic is paused until the store answers, the partition is paused with
   * it already: only its timer is set, and {@link PartitionPauser.resumeStoreTopics} keeps it paused while
   * the timer runs.
   */
  pauseFor(topic: string, partition: number, delayMs: number): void {
    const id = `${partition}:${topic}`;
    clearTimeout(this.#timers.get(id)?.timer);
    this.#unresumed.delete(id); // this timer owns it now
    const timer = setTimeout(() => {
      this.#timers.delete(id);
      if (this.#storeWaitTopics.has(topic)) return; // the store watcher resumes the whole topic
      if (this.#application.isPaused(topic, partition)) return;
      if (!this.#call('resume', [{ topic, partitions: [partition] }])) this.#unresumed.add(id);
    }, delayMs);
    timer.unref();
    const storeWait = this.#storeWaitTopics.has(topic);
    if (!storeWait) this.#adoptObserved(topic); // before this timer counts the partition as this wrapper's
    this.#timers.set(id, { timer, topic, partition });
    if (storeWait || this.#application.isPaused(topic, partition)) return; // paused already
    // KafkaJS turns a topic's pause into that of the partitions named when some are paused
    // (`SubscriptionState.pause` clears `pauseAll`): pausing this one alone would resume every other
    // partition of the topic while the store still does not answer, or that the application paused as a
    // whole (this one it resumed since).
    if (this.#application.of(topic).all) this.#restoreOwnPauses(topic);
    else this.#call('pause', [{ topic, partitions: [partition] }]);
  }

  /**
   * Pauses every partition of `topic` (fail closed: the store does not answer) until
   * {@link PartitionPauser.resumeStoreTopics} (the store gate opened). When `storeAnswers()` already says
   * the store answers again (it recovered while the message was being given up on), resumes at once.
   */
  pauseUntilStoreAnswers(topic: string, storeAnswers: () => boolean): void {
    if (!this.#storeWaitTopics.has(topic)) this.#adoptObserved(topic);
    this.#call('pause', [{ topic }]);
    this.#storeWaitTopics.add(topic);
    if (storeAnswers()) this.resumeStoreTopics();
  }

  /**
   * Resumes every topic paused by {@link PartitionPauser.pauseUntilStoreAnswers}, keeping paused the
   * partitions whose own backoff still runs and those the application paused.
   * @returns the topics resumed.
   */
  resumeStoreTopics(): string[] {
    if (this.#closed) return [];
    const topics = [...this.#storeWaitTopics];
    this.#storeWaitTopics.clear();
    return topics.filter((topic) => this.#restoreOwnPauses(topic));
  }

  /** Stops the timers (the consumer is going away); nothing is resumed. Gives the consumer its methods back. */
  close(): void {
    this.#closed = true;
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    this.#unresumed.clear();
    this.#storeWaitTopics.clear();
    this.#application.uninstall();
  }

  /**
   * Sets `topic`'s pauses to the application's and this wrapper's together: the whole topic while it
   * waits for the store; else what the application's calls left paused, and the partitions whose backoff
   * runs. Called when the store answers again, and after each call of the application on a topic this
   * wrapper pauses partitions of (KafkaJS's one pause state per partition has no owner: a resume of the
   * application would end the wrapper's pause, a pause of some partitions its pause of the whole topic).
   * @returns false when the consumer refused the resume (a `brokerError` event), nothing else tried.
   */
  #restoreOwnPauses(topic: string): boolean {
    if (this.#closed) return true;
    const mine = [...this.#timers.values()].filter((t) => t.topic === topic).map((t) => t.partition);
    if (this.#storeWaitTopics.has(topic)) return this.#call('pause', [{ topic }]);
    if (!this.#call('resume', [{ topic }])) return false;
    // resumed with the topic
    for (const id of this.#unresumed) if (id.slice(id.indexOf(':') + 1) === topic) this.#unresumed.delete(id);
    const application = this.#application.of(topic);
    if (application.all) {
      this.#call('pause', [{ topic }]);
      const except = application.except.filter((p) => !mine.includes(p));
      if (except.length > 0) this.#call('resume', [{ topic, partitions: except }]);
    } else {
      const paused = [...new Set([...application.partitions, ...mine])];
      if (paused.length > 0) this.#call('pause', [{ topic, partitions: paused }]);
    }
    return true;
  }

  /**
   * Takes the partitions of `topic` that `consumer.paused()` (when the consumer has it) shows paused and
   * this wrapper did not pause for ones the application paused. Called before this wrapper pauses some of
   * `topic`, while none of it waits for the store (all of it would show paused then).
   */
  #adoptObserved(topic: string): void {
    if (typeof this.consumer.paused !== 'function') return;
    let observed: ReturnType<NonNullable<ConsumerLike['paused']>>;
    try {
      observed = this.consumer.paused();
    } catch (error) {
      this.events.emit('brokerError', { operation: 'paused', error, source: undefined });
      return;
    }
    for (const { topic: name, partitions = [] } of observed) {
      if (name !== topic) continue;
      for (const partition of partitions) {
        const id = `${partition}:${topic}`;
        if (this.#timers.has(id) || this.#unresumed.has(id)) continue; // paused by this wrapper
        if (!this.#application.isPaused(topic, partition)) this.#application.adopt(topic, partition);
      }
    }
  }

  /** Whether this wrapper pauses some of `topic` now: the whole topic, or a partition for its backoff. */
  #pausesAny(topic: string): boolean {
    return this.#storeWaitTopics.has(topic) || [...this.#timers.values()].some((t) => t.topic === topic);
  }

  #call(method: 'pause' | 'resume', topics: { topic: string; partitions?: number[] }[]): boolean {
    try {
      this.#application[method](topics);
      return true;
    } catch (error) {
      this.events.emit('brokerError', { operation: method, error, source: undefined });
      return false;
    }
  }
}
