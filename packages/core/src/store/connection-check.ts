import type { StoreUnavailableError } from '../errors';
import { connectionForKey } from './cluster-node';
import type { RedisClient } from './redis-client';
import { notConnectedError } from './unanswered-error';

/** What is read of a client: its ioredis `status` and its `ready` event. */
interface StatusSource {
  readonly status?: string;
  once?(event: 'ready', listener: () => void): unknown;
}

/** The errors {@link ConnectionCheck} refused a command with: that command was never sent. */
const refusals = new WeakSet<object>();

/** Whether `error` is a refusal of {@link ConnectionCheck}: the command was not sent. */
export function wasNotSent(error: unknown): boolean {
  return typeof error === 'object' && error !== null && refusals.has(error);
}

/** A refusal, remembered as one. */
function refuse(status: string | undefined): StoreUnavailableError {
  const error = notConnectedError(status);
  refusals.add(error);
  return error;
}

/** ioredis statuses of a client on its way to a connection that is not up yet. */
const CONNECTING = new Set(['wait', 'connecting', 'connect']);

/**
 * Whether the store may hand a command to its ioredis client now. A client that is not connected keeps a
 * command in its offline queue (the default, `enableOfflineQueue: true`) and writes it once it reconnects,
 * long after the store's caller gave up on it at `commandTimeoutMs`: a claim written then holds its key for
 * a whole lease that nobody runs. So once the client has been ready, a command is sent only while it is
 * `ready`; otherwise the store rejects at once with `StoreUnavailableError` and sends nothing, whatever the
 * client's options. Before the client was ever ready (`new Redis()` a moment ago, `lazyConnect`), a command
 * is handed to it as it is: a new client is not an outage, and a claim written late after its first
 * connection still counts as unanswered and is given back (pending-releases.ts).
 *
 * On a Cluster the same holds for the Cluster client; and a command for a key is not sent while the
 * connection to the master of its slot is closed or reconnecting (one that has not connected yet, which
 * ioredis opens on first use, is not refused).
 */
export class ConnectionCheck {
  readonly #redis: RedisClient & StatusSource;
  #wasReady: boolean;

  constructor(redis: RedisClient) {
    this.#redis = redis;
    this.#wasReady = redis.status === 'ready' || redis.status === undefined;
    if (!this.#wasReady) {
      (redis as StatusSource).once?.('ready', () => {
        this.#wasReady = true;
      });
    }
  }

  /**
   * `undefined` when a command may be sent now (on `key`'s connection, for a key on a Cluster), else the
   * error to reject it with.
   */
  refusal(key?: string): StoreUnavailableError | undefined {
    const status = this.#redis.status;
    // A client that reports no status (a stand-in) is sent to as it is.
    if (status !== 'ready' && status !== undefined && !(CONNECTING.has(status) && !this.#wasReady)) {
      return refuse(status);
    }
    if (key === undefined || !this.#redis.isCluster) return undefined;
    return this.nodeRefusal(connectionForKey(this.#redis, key));
  }

  /** {@link ConnectionCheck.refusal} of one Cluster node's connection (`undefined`: not known, not refused). */
  nodeRefusal(node: StatusSource | undefined): StoreUnavailableError | undefined {
    const status = node?.status;
    return status === 'reconnecting' || status === 'close' || status === 'end' ? refuse(status) : undefined;
  }
}
