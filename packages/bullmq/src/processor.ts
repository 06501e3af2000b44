import { InvalidOptionError } from '@idempotent-consumer/core';
import { AdapterLog, StopSignal, StoreGate } from '@idempotent-consumer/core/kit';
import type { Job } from 'bullmq';
import type { BullMqIdempotencyDependencies } from './dependencies';
import { BullMqEventEmitter } from './events';
import type { BullMqHandler } from './handler';
import { type ActiveJob, BullMqPort } from './job-port';
import { type BullMqIdempotencyOptions, resolveBullMqOptions } from './options';

/** What {@link IdempotentProcessor.attach} uses of a BullMQ `Worker`. */
export interface WorkerLike {
  readonly opts: { readonly lockDuration?: number };
  /** `worker.pause(true)`: fetch no more jobs, without waiting for those running. */
  pause(doNotWaitActive?: boolean): unknown;
  resume(): unknown;
  isPaused(): boolean;
  on(event: 'closing', listener: (message: string) => void): unknown;
}

/** BullMQ's default lock duration, in milliseconds. */
const BULLMQ_LOCK_DURATION_MS = 30_000;

/**
 * A BullMQ processor function, with its `events`, {@link IdempotentProcessor.attach} for the worker that
 * runs it, and `close()`.
 * @typeParam T - what the handler returns: the job's return value.
 * @typeParam D - the jobs' data.
 */
export interface IdempotentProcessor<T, D = unknown> {
  /** The function to pass to `new Worker(queue, processor, options)`. */
  (job: Job<D>, token?: string): Promise<T>;
  /** The processor's events (`settled`, `retryScheduled`, `deadLettered`, …); see {@link BullMqIdempotencyEvents}. */
  readonly events: BullMqEventEmitter;
  /**
   * Ties the processor to a worker that runs it. The worker is paused with `worker.pause(true)` while the
   * store does not answer and resumed once a probe answers, and the processor closes once every worker
   * attached to it is closing. Call it right after `new Worker(...)`. @returns `worker`
   * @throws {@link @idempotent-consumer/core!InvalidOptionError} when the lease is shorter than the
   *   worker's `lockDuration`, since a stalled job would then meet a lapsed claim while its first run goes on.
   */
  attach<W extends WorkerLike>(worker: W): W;
  /**
   * Ends the waits for a conflicting holder and for the store (those jobs go back to the queue), makes
   * jobs not started yet go back, stops the store probe, the Redis watch and the logger. Handlers in
   * flight run to their end. `attach` calls it when the worker closes.
   */
  close(): void;
  /**
   * Sends one ping to the store. The processor also pings once on its first job and logs a failure.
   * @throws {@link @idempotent-consumer/core!StoreUnavailableError} naming where Redis is.
   */
  checkStore(): Promise<void>;
}

/**
 * Wraps a handler into a BullMQ processor that runs it effectively once per idempotency key, as the
 * BullMQ column of docs/design.md#outcome-to-broker-action says. The key is the `jobId` the producer set.
 * - ACQUIRED or ACQUIRED_STALE, a stalled job run again, runs the handler, writes COMPLETED, then returns
 *   its result. A DUPLICATE returns the stored result without running.
 * - A CONFLICT waits up to `conflictWaitMs` for the holder. Still held, the job is moved to delayed for
 *   `min(remaining lease, maxConflictDelayMs)` with a `DelayedError`, and no attempt is spent.
 * - A handler error releases the record and is rethrown, for BullMQ's `attempts` and `backoff`.
 * - A FAILED record, PAYLOAD_MISMATCH, `maxAttempts` reached, a `NonRetryableError` or a missing or invalid
 *   key fails the job with an `UnrecoverableError` whose `failedReason` holds the dead-letter fields.
 * - While the store does not answer nothing completes. Attached workers pause until a probe answers, and
 *   the job goes back to delayed unclaimed.
 * @example
 * ```ts
 * const processor = idempotentProcessor({ idempotency }, {}, async ({ job }) => charge(job.data));
 * processor.attach(new Worker('payments', processor, { connection }));
 * ```
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when an option is invalid or a dependency missing.
 */
export function idempotentProcessor<T, D = unknown>(
  dependencies: BullMqIdempotencyDependencies,
  options: BullMqIdempotencyOptions,
  handler: BullMqHandler<T, D>,
): IdempotentProcessor<T, D> {
  const idempotency = dependencies?.idempotency;
  if (!idempotency) throw new InvalidOptionError('idempotentProcessor needs { idempotency }');
  if (typeof handler !== 'function') throw new InvalidOptionError('idempotentProcessor needs a handler');
  const resolved = resolveBullMqOptions(options);
  const events = new BullMqEventEmitter();
  const where =
    resolved.scope === undefined ? 'the BullMQ processor' : `the BullMQ processor of ${resolved.scope}`;
  const log = AdapterLog.for(idempotency, dependencies.logger, where, { scope: resolved.scope });
  // A processor has no start, so the runner's warnings reach its logger from now until close().
  log.open();
  const unwatchRedis = StoreGate.watchRedisErrors(idempotency.store, log);
  const stopping = new StopSignal();
  const attached = new Set<WorkerLike>();
  const pausedByUs = new Set<WorkerLike>();
  const brokerError = (operation: string, error: unknown) =>
    events.emit('brokerError', { queue: undefined, operation, error, source: undefined });
  const gate = new StoreGate(
    idempotency.store,
    { storeProbeBackoff: resolved.storeProbeBackoff, log },
    {
      onStoreUnavailable: ({ error, about }) => {
        const queue = (about as ActiveJob | undefined)?.job?.queueName;
        events.emit('storeUnavailable', { queue, error });
        for (const worker of attached) {
          if (worker.isPaused()) continue; // its owner paused it, and resumes it
          pausedByUs.add(worker);
          call(() => worker.pause(true)).catch((e: unknown) => brokerError('pause', e));
        }
      },
      onStoreRecovered: ({ downMs }) => {
        for (const worker of pausedByUs) {
          if (attached.has(worker))
            call(() => worker.resume()).catch((e: unknown) => brokerError('resume', e));
        }
        pausedByUs.clear();
        events.emit('storeRecovered', { downMs });
      },
    },
  );
  const port = new BullMqPort<T>({
    idempotency,
    options: resolved,
    handler: handler as BullMqHandler<T, never>,
    events,
    gate,
    log,
    stopping: stopping.signal,
  });
  const checkStore = () => StoreGate.check(idempotency.store, log.where);
  let checked = false;
  const close = () => {
    if (stopping.signal.aborted) return;
    stopping.abort();
    gate.dispose();
    unwatchRedis();
    log.close();
  };

  const processor = async (job: Job<D>, token?: string): Promise<T> => {
    if (!checked) {
      checked = true;
      checkStore().catch((error: unknown) => log.error(describe(error), { error }));
    }
    const end = await port.process(job as Job, token);
    if ('error' in end) throw end.error;
    return end.value as T;
  };
  const attach = <W extends WorkerLike>(worker: W): W => {
    const lockMs = worker.opts.lockDuration ?? BULLMQ_LOCK_DURATION_MS;
    if (port.leaseMs < lockMs) {
      throw new InvalidOptionError(
        `leaseMs (${port.leaseMs}) must be at least the worker's lockDuration (${lockMs}): a stalled job would meet a lapsed claim while its first run goes on`,
      );
    }
    attached.add(worker);
    worker.on('closing', () => {
      attached.delete(worker);
      if (attached.size === 0) close();
    });
    return worker;
  };
  return Object.assign(processor, { events, attach, close, checkStore });
}

/** Calls `f` and rejects when it throws or rejects. BullMQ 5's `resume` returns nothing, 6's a promise. */
async function call(f: () => unknown): Promise<unknown> {
  return f();
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
