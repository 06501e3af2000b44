import type {
  ClaimOptions,
  ClaimReply,
  ClaimRequest,
  ExtendReply,
  Idempotency,
  IdempotencyRecord,
  IdempotencyStore,
  MarkDeadLetteredReply,
  OutcomeWaitOptions,
  RecordId,
  StartReply,
  WriteReply,
} from '../../src';

/** Store operations a {@link FaultyStore} can break. */
export type Operation =
  | 'claim'
  | 'claimMany'
  | 'complete'
  | 'release'
  | 'fail'
  | 'extend'
  | 'start'
  | 'markDeadLettered'
  | 'waitForOutcome'
  | 'get'
  | 'ping';

/**
 * What happens to the next calls of one operation: `throw` rejects without touching the store (the store
 * did not answer); `applyThenThrow` lets the store apply the call, then rejects (the reply was lost, e.g.
 * a client-side timeout); `hangThenThrow` answers nothing for `ms`, then rejects (a command timeout).
 */
export type Fault =
  | { kind: 'throw'; error: () => unknown }
  | { kind: 'applyThenThrow'; error: () => unknown }
  | { kind: 'hangThenThrow'; ms: number; error: () => unknown };

/**
 * An {@link IdempotencyStore} that delegates to a real one (the in-memory store) and injects faults per
 * operation, to test the runner's fail-closed/fail-open paths and its write retries. Counts every call.
 */
export class FaultyStore implements IdempotencyStore {
  readonly calls: Record<Operation, number> = {
    claim: 0,
    claimMany: 0,
    complete: 0,
    release: 0,
    fail: 0,
    extend: 0,
    start: 0,
    markDeadLettered: 0,
    waitForOutcome: 0,
    get: 0,
    ping: 0,
  };
  readonly #faults = new Map<Operation, Fault[]>();
  /** Operations broken for every call after their queued faults, until {@link FaultyStore.heal}. */
  readonly #broken = new Map<Operation, Fault>();

  constructor(readonly inner: IdempotencyStore) {}

  /** Queues `times` faults for `operation` (each call consumes one). */
  inject(operation: Operation, fault: Fault, times = 1): this {
    const queue = this.#faults.get(operation) ?? [];
    for (let i = 0; i < times; i++) queue.push(fault);
    this.#faults.set(operation, queue);
    return this;
  }

  /**
   * Breaks `operation` for every later call (after the faults queued for it) until
   * {@link FaultyStore.heal}. One entry, not a queue of a million faults: filling that took up to 1.3 s
   * on a loaded machine, inside the timed part of the tests that call this.
   */
  breakAlways(operation: Operation, error: () => unknown): this {
    this.#broken.set(operation, { kind: 'throw', error });
    return this;
  }

  heal(operation?: Operation): void {
    if (operation) {
      this.#faults.delete(operation);
      this.#broken.delete(operation);
    } else {
      this.#faults.clear();
      this.#broken.clear();
    }
  }

  async #do<T>(operation: Operation, call: () => Promise<T>): Promise<T> {
    this.calls[operation]++;
    const fault = this.#faults.get(operation)?.shift() ?? this.#broken.get(operation);
    if (!fault) return call();
    if (fault.kind === 'throw') throw fault.error();
    if (fault.kind === 'hangThenThrow') {
      // Unref'd: a call still hanging when its test ends (the caller gave up on it, as StoreGate's bounded
      // wait does) must not keep the Jest worker alive; while a test runs, Jest keeps the process up anyway.
      await new Promise((r) => setTimeout(r, fault.ms).unref());
      throw fault.error();
    }
    await call();
    throw fault.error();
  }

  claim(id: RecordId, options: ClaimOptions): Promise<ClaimReply> {
    return this.#do('claim', () => this.inner.claim(id, options));
  }
  claimMany(requests: readonly ClaimRequest[]): Promise<ClaimReply[]> {
    return this.#do('claimMany', () => this.inner.claimMany(requests));
  }
  complete(
    id: RecordId,
    token: number,
    options: { retentionMs: number; result?: string },
  ): Promise<WriteReply> {
    return this.#do('complete', () => this.inner.complete(id, token, options));
  }
  release(id: RecordId, token: number, options: { retentionMs: number }): Promise<WriteReply> {
    return this.#do('release', () => this.inner.release(id, token, options));
  }
  fail(id: RecordId, token: number, options: { retentionMs: number; error: string }): Promise<WriteReply> {
    return this.#do('fail', () => this.inner.fail(id, token, options));
  }
  extend(
    id: RecordId,
    token: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<ExtendReply> {
    return this.#do('extend', () => this.inner.extend(id, token, options));
  }
  start(id: RecordId, token: number, options: { leaseMs: number; retentionMs: number }): Promise<StartReply> {
    return this.#do('start', () => this.inner.start(id, token, options));
  }
  markDeadLettered(id: RecordId, token: number): Promise<MarkDeadLetteredReply> {
    return this.#do('markDeadLettered', () => this.inner.markDeadLettered(id, token));
  }
  waitForOutcome(id: RecordId, options: ClaimOptions, wait: OutcomeWaitOptions): Promise<ClaimReply> {
    return this.#do('waitForOutcome', () => this.inner.waitForOutcome(id, options, wait));
  }
  get(id: RecordId): Promise<IdempotencyRecord | null> {
    return this.#do('get', () => this.inner.get(id));
  }
  ping(): Promise<void> {
    return this.#do('ping', () => this.inner.ping());
  }
}

/** Collects every event of a runner, in order, as `[name, payload]`. */
export function recordEvents(idempotency: Idempotency): [string, Record<string, unknown>][] {
  const emitter = idempotency as unknown as { on(name: string, listener: (payload: unknown) => void): void };
  const seen: [string, Record<string, unknown>][] = [];
  for (const name of [
    'outcome',
    'completed',
    'released',
    'failed',
    'leaseLost',
    'storeError',
    'failOpen',
    'resultOmitted',
  ]) {
    emitter.on(name, (payload) => seen.push([name, payload as Record<string, unknown>]));
  }
  return seen;
}
