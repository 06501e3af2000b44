import { InvalidOptionError, ReplicationTimeoutError } from '../errors';
import { connectionForKey } from './cluster-node';
import type { RedisClient } from './redis-client';

/**
 * How many replicas must have acknowledged a write before a store call resolves, so that a failover to one of
 * them keeps it. The store sends `WAIT numreplicas timeout`, see https://redis.io/docs/latest/commands/wait/.
 */
export interface WaitForReplicasOptions {
  /** Replicas that must acknowledge each write that matters. Integer >= 1. */
  readonly replicas: number;
  /** Longest wait for them, in milliseconds. Integer >= 1, since `WAIT`'s 0 would block forever. */
  readonly timeoutMs: number;
}

/**
 * Checks {@link WaitForReplicasOptions}.
 * @throws {@link InvalidOptionError} when `replicas` or `timeoutMs` is not a positive integer.
 */
export function checkWaitForReplicas(options: WaitForReplicasOptions): WaitForReplicasOptions {
  const { replicas, timeoutMs } = options ?? ({} as WaitForReplicasOptions);
  if (!Number.isSafeInteger(replicas) || replicas < 1) {
    throw new InvalidOptionError(`waitForReplicas.replicas must be an integer >= 1, got ${replicas}`);
  }
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new InvalidOptionError(
      `waitForReplicas.timeoutMs must be an integer >= 1 (milliseconds), got ${timeoutMs}`,
    );
  }
  return { replicas, timeoutMs };
}

/**
 * Sends `WAIT replicas timeoutMs` on the connection that wrote `key`, in a Cluster the client's connection to
 * the key's master. It blocks until that many replicas acknowledged every earlier write of the connection, or
 * the timeout passes.
 *
 * @param operation - the write it follows, such as `claim` or `complete`, for the error message.
 * @throws {@link ReplicationTimeoutError} when fewer replicas acknowledged in time. The write itself was
 *   applied on the primary, and a failover before the replicas catch up may lose it. Failures of the command
 *   itself reject as the client rejects, and the caller maps them.
 */
export async function waitForReplicas(
  redis: RedisClient,
  key: string,
  options: WaitForReplicasOptions,
  operation: string,
): Promise<void> {
  const connection = connectionForKey(redis, key);
  if (!connection) {
    throw new ReplicationTimeoutError(
      `The ${operation} was written, but the Cluster slot map does not know the node of its key to WAIT on`,
      { acknowledgedReplicas: 0, requiredReplicas: options.replicas },
    );
  }
  const acknowledged = Number(await connection.call('WAIT', options.replicas, options.timeoutMs));
  if (!(acknowledged >= options.replicas)) {
    throw new ReplicationTimeoutError(
      `The ${operation} was written on the primary but acknowledged by ${acknowledged} of ${options.replicas} required replica(s) within ${options.timeoutMs} ms`,
      { acknowledgedReplicas: acknowledged, requiredReplicas: options.replicas },
    );
  }
}
