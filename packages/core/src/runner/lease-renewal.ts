import { performance } from 'node:perf_hooks';
import { InvalidOptionError } from '../errors';

/**
 * A renewal of a claim's lease that the store confirmed, an `extend` or `start` it answered `ok`. It was made
 * after the claim by whoever kept the claim alive while it waited, such as a `LeaseKeeperSet`, whose `take`
 * hands over its last one. The store renewed the lease no earlier than the request was sent, so the lease
 * counts from the send time, never from when the reply came back. On the store it ends no earlier than
 * `sentAt + leaseMs`, since both clocks run at the same rate, as the runner assumes for every lease.
 */
export interface LeaseRenewal {
  /**
   * When the renewal's request was sent, in milliseconds of this process's `performance.now()`, taken just
   * before the store call rather than after its reply.
   */
  readonly sentAt: number;
  /**
   * The lease the store granted from when it applied the renewal, in milliseconds. It is the reply's
   * `leaseExpiresAtMs - serverTimeMs`, both on the store's clock.
   */
  readonly leaseMs: number;
  /**
   * The fencing token of the claim the renewal was for. `execute` refuses a renewal of another claim, whose
   * lease says nothing of this one's.
   */
  readonly fencingToken: number;
}

/**
 * The renewal a store reply confirms, for a request sent at `sentAt` for the claim holding `fencingToken`.
 * `sentAt` is `performance.now()` in milliseconds.
 * @param reply - an `ok` reply of `extend` or `start`, whose `leaseExpiresAtMs` and `serverTimeMs` are on the
 *   store's clock.
 */
export function renewalOf(
  sentAt: number,
  reply: { readonly leaseExpiresAtMs: number; readonly serverTimeMs: number },
  fencingToken: number,
): LeaseRenewal {
  return { sentAt, leaseMs: reply.leaseExpiresAtMs - reply.serverTimeMs, fencingToken };
}

/**
 * Checks a {@link LeaseRenewal} a caller passed as `ExecuteOptions.renewedLease` for the claim holding
 * `fencingToken`, and returns it.
 * @param name - the option's name, for the error message.
 * @param renewal - what the caller passed.
 * @param fencingToken - the fencing token of the claim being executed.
 * @throws {@link InvalidOptionError} when it is not an object, `sentAt` is not a finite number or lies after
 *   `performance.now()`, `leaseMs` is not a finite number >= 0, or `fencingToken` is not the claim's.
 */
export function checkLeaseRenewal(name: string, renewal: unknown, fencingToken: number): LeaseRenewal {
  const r = renewal as Partial<LeaseRenewal> | null;
  if (typeof r !== 'object' || r === null) {
    throw new InvalidOptionError(
      `${name} must be an object { sentAt, leaseMs }, got ${r === null ? 'null' : typeof r}`,
    );
  }
  if (typeof r.sentAt !== 'number' || !Number.isFinite(r.sentAt) || r.sentAt > performance.now()) {
    throw new InvalidOptionError(
      `${name}.sentAt must be a performance.now() time no later than now, got ${String(r.sentAt)}`,
    );
  }
  if (typeof r.leaseMs !== 'number' || !Number.isFinite(r.leaseMs) || r.leaseMs < 0) {
    throw new InvalidOptionError(`${name}.leaseMs must be a finite number >= 0, got ${String(r.leaseMs)}`);
  }
  if (r.fencingToken !== fencingToken) {
    throw new InvalidOptionError(
      `${name}.fencingToken must be the claim's (${fencingToken}): a renewal of another claim says nothing of this one's lease, got ${String(r.fencingToken)}`,
    );
  }
  return r as LeaseRenewal;
}
