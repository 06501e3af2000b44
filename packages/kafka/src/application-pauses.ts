import type { ConsumerLike, TopicPartitionsLike } from './types';

type PauseMethod = (topics: TopicPartitionsLike[]) => unknown;

/**
 * One topic's pauses as KafkaJS keeps them (`SubscriptionState`): the whole topic (`all`) but the
 * partitions resumed since, or else the partitions named.
 */
interface TopicPauses {
  all: boolean;
  readonly paused: Set<number>;
  readonly resumed: Set<number>;
}

/** What the application's own calls leave paused of one topic: see {@link ApplicationPauses.of}. */
export type ApplicationTopicPauses =
  | { readonly all: true; readonly except: readonly number[] }
  | { readonly all: false; readonly partitions: readonly number[] };

/**
 * The pauses the application itself asked of the consumer (`consumer.pause` / `consumer.resume`, e.g. for
 * backpressure), kept apart from the wrapper's own so that the wrapper never resumes one of them.
 *
 * KafkaJS keeps one pause state per partition, whoever paused it (`SubscriptionState`), and a pause the
 * application makes of a partition the wrapper paused already changes nothing there: no later reading of
 * `consumer.paused()` tells it apart. So the wrapper installs itself over the consumer's `pause` and
 * `resume` (the instance's own properties; {@link ApplicationPauses.uninstall} puts them back): each call
 * goes to the consumer as before, and when the consumer took it (it validates its argument and throws),
 * it is recorded here with KafkaJS's semantics (a topic without `partitions` pauses all of it, resuming some
 * of it keeps the rest paused, naming partitions to pause ends a whole-topic pause), then `afterCall` is
 * told the topics it named, for the wrapper to put its own pauses back. The wrapper's calls go to the
 * consumer's original methods ({@link ApplicationPauses.pause}, {@link ApplicationPauses.resume}) and are
 * not recorded. A consumer whose methods cannot be replaced (a frozen object) is used as it is: the
 * application's pauses are then only those the wrapper sees in `consumer.paused()`
 * ({@link ApplicationPauses.adopt}).
 */
export class ApplicationPauses {
  readonly #topics = new Map<string, TopicPauses>();
  readonly #pause: PauseMethod;
  readonly #resume: PauseMethod;
  readonly #restore: (() => void)[] = [];

  constructor(consumer: ConsumerLike, afterCall: (topics: string[]) => void) {
    const original = { pause: consumer.pause, resume: consumer.resume };
    this.#pause = (topics) => original.pause.call(consumer, topics);
    this.#resume = (topics) => original.resume.call(consumer, topics);
    for (const method of ['pause', 'resume'] as const) {
      const forward = method === 'pause' ? this.#pause : this.#resume;
      const intercepted: PauseMethod = (topics) => {
        const result = forward(topics); // throws on an argument the consumer refuses: nothing recorded
        const list = Array.isArray(topics) ? topics : [];
        for (const { topic, partitions } of list) this.#record(method, topic, partitions);
        afterCall([...new Set(list.map((t) => t.topic))]);
        return result;
      };
      const own = Object.hasOwn(consumer, method);
      try {
        consumer[method] = intercepted;
      } catch {
        continue; // not replaceable: only consumer.paused() tells the application's pauses
      }
      this.#restore.push(() => {
        if (consumer[method] !== intercepted) return; // replaced again since: left as it is
        if (own) consumer[method] = original[method];
        else delete (consumer as Partial<ConsumerLike>)[method];
      });
    }
  }

  /** The consumer's own `pause`, for the wrapper's pauses (not the application's). */
  pause(topics: TopicPartitionsLike[]): void {
    this.#pause(topics);
  }

  /** The consumer's own `resume`, for the wrapper's resumes (not the application's). */
  resume(topics: TopicPartitionsLike[]): void {
    this.#resume(topics);
  }

  /** Whether the application's own calls leave `partition` of `topic` paused. */
  isPaused(topic: string, partition: number): boolean {
    const state = this.#topics.get(topic);
    if (state === undefined) return false;
    return (state.all && !state.resumed.has(partition)) || state.paused.has(partition);
  }

  /**
   * What the application's own calls leave paused of `topic`: the whole topic `except` the partitions it
   * resumed since, or the `partitions` it named.
   */
  of(topic: string): ApplicationTopicPauses {
    const state = this.#topics.get(topic);
    if (state?.all) return { all: true, except: [...state.resumed] };
    return { all: false, partitions: [...(state?.paused ?? [])] };
  }

  /**
   * Takes `partition` of `topic` for one the application paused: the wrapper saw it paused in
   * `consumer.paused()` without having paused it (a pause made before the wrapper was installed, or
   * through a reference to the original method).
   */
  adopt(topic: string, partition: number): void {
    const state = this.#state(topic);
    if (state.all) state.resumed.delete(partition);
    else state.paused.add(partition);
  }

  /** Puts the consumer's own `pause` and `resume` back, unless something replaced them since. */
  uninstall(): void {
    for (const restore of this.#restore.splice(0)) restore();
  }

  /** One call of the application, as KafkaJS's `SubscriptionState.pause` / `resume` applies it. */
  #record(method: 'pause' | 'resume', topic: string, partitions: number[] | undefined): void {
    const state = this.#state(topic);
    if (partitions === undefined) {
      state.paused.clear();
      state.resumed.clear();
      state.all = method === 'pause';
      return;
    }
    for (const partition of partitions) {
      if (method === 'pause') {
        state.paused.add(partition);
        state.resumed.delete(partition);
      } else {
        state.paused.delete(partition);
        if (state.all) state.resumed.add(partition);
      }
    }
    if (method === 'pause') state.all = false;
  }

  #state(topic: string): TopicPauses {
    let state = this.#topics.get(topic);
    if (state === undefined) {
      state = { all: false, paused: new Set(), resumed: new Set() };
      this.#topics.set(topic, state);
    }
    return state;
  }
}
