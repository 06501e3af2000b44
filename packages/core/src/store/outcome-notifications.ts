import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './redis-client';

/**
 * Receives the outcome notifications that the complete, release and fail scripts publish for the records
 * someone waits on. They use sharded Pub/Sub with the record key as channel, see lua/includes/notify.lua.
 * There is one subscriber connection per store, duplicated from the store's client when the first wait begins
 * and closed once nobody has waited for `idleMs`. A Cluster client is duplicated with
 * `shardedSubscribers: true`, so each channel is subscribed on the node that owns its slot. The path without
 * conflicts never touches it.
 */
export class OutcomeNotifications {
  /** Per channel, who listens and the subscription every listener awaits, dropped when it fails. */
  readonly #channels = new Map<string, { wakers: Set<() => void>; subscribed: Promise<unknown> }>();
  #subscriber: RedisClient | undefined;
  #idleTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly options: { readonly subscribeTimeoutMs: number; readonly idleMs: number },
  ) {}

  /**
   * Calls `wake` on every notification for `channel` until the returned function is called. The channel is a
   * record key as the store names it, without the client's own `keyPrefix`. Every listener of a channel
   * awaits the same subscription. All reject when it is not confirmed within `subscribeTimeoutMs`, and the
   * callers then poll. The next listener subscribes again.
   */
  async listen(channel: string, wake: () => void): Promise<() => void> {
    clearTimeout(this.#idleTimer);
    const subscriber = this.#connect();
    let entry = this.#channels.get(channel);
    if (!entry) {
      const subscribed = withTimeout(subscriber.ssubscribe(channel), this.options.subscribeTimeoutMs);
      const created = { wakers: new Set<() => void>(), subscribed };
      subscribed.catch(() => {
        if (this.#channels.get(channel) === created) this.#channels.delete(channel);
      });
      this.#channels.set(channel, created);
      entry = created;
    }
    entry.wakers.add(wake);
    const stop = () => this.#remove(channel, wake);
    try {
      await entry.subscribed;
    } catch (error) {
      stop();
      throw error;
    }
    return stop;
  }

  /** Closes the subscriber connection now. Waits in progress fall back to polling. */
  close(): void {
    clearTimeout(this.#idleTimer);
    this.#subscriber?.disconnect();
    this.#subscriber = undefined;
    this.#channels.clear();
  }

  #connect(): RedisClient {
    if (this.#subscriber) return this.#subscriber;
    const subscriber = this.redis.isCluster
      ? (this.redis as Cluster).duplicate(undefined, { shardedSubscribers: true })
      : (this.redis as Redis).duplicate();
    // ioredis prefixes the channel of SSUBSCRIBE with the client's `keyPrefix`, like the record key the
    // scripts publish on. smessage reports the prefixed name, so the prefix is taken off before the lookup.
    const prefix = this.redis.options.keyPrefix ?? '';
    subscriber.on('error', () => {}); // it reconnects by itself, and the waits poll meanwhile
    subscriber.on('smessage', (channel: string) => {
      const name = prefix !== '' && channel.startsWith(prefix) ? channel.slice(prefix.length) : channel;
      for (const wake of this.#channels.get(name)?.wakers ?? []) wake();
    });
    this.#subscriber = subscriber;
    return subscriber;
  }

  #remove(channel: string, wake: () => void): void {
    const entry = this.#channels.get(channel);
    if (entry?.wakers.delete(wake)) {
      if (entry.wakers.size > 0) return;
      this.#channels.delete(channel);
      this.#subscriber?.sunsubscribe(channel).catch(() => {});
    }
    // Also when the channel is gone already, because its subscription failed or timed out and listen()
    // cleared the idle timer. Without this the subscriber connection stayed open until close() and kept the
    // process alive.
    if (this.#channels.size === 0 && this.#subscriber) {
      clearTimeout(this.#idleTimer);
      this.#idleTimer = setTimeout(() => this.close(), this.options.idleMs);
      this.#idleTimer.unref();
    }
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no subscription within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
