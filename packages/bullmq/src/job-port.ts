import type { Idempotency, Payload } from '@idempotent-consumer/core';
import {
  type AdapterLog,
  type CarriedOut,
  type MessageEnd,
  MessagePipeline,
  type MessagePort,
  type MessageTelemetry,
  type StoreGate,
  type SubjectFields,
  type WarningWords,
} from '@idempotent-consumer/core/kit';
import { DelayedError, type Job } from 'bullmq';
import { deadLetterError } from './dead-letter';
import { type Decision, hasAttemptsLeft, type LeaveReason, toBullMqDecision } from './decide';
import type { BullMqEventEmitter, BullMqSource, MessageSubject } from './events';
import type { BullMqHandler } from './handler';
import type { ResolvedBullMqOptions } from './options';
import { bullMqTelemetry } from './telemetry';

/** One job in the processor, with the lock token BullMQ passed. */
export interface ActiveJob {
  readonly job: Job;
  readonly token: string | undefined;
}

/** What the processor does for BullMQ, return a value so that the job completes, or throw an error. */
export type ProcessorEnd = { readonly value: unknown } | { readonly error: Error };

/** What a {@link BullMqPort} is built from. */
export interface BullMqPortParts<T> {
  readonly idempotency: Idempotency;
  readonly options: ResolvedBullMqOptions;
  readonly handler: BullMqHandler<T, never>;
  readonly events: BullMqEventEmitter;
  readonly gate: StoreGate;
  readonly log: AdapterLog;
  /** Aborts when the processor closes. Conflict waits end, and jobs not started go back to the queue. */
  readonly stopping: AbortSignal;
}

/**
 * BullMQ as the pipeline's port. It reads a job's key, the `jobId`, and its data, and turns each decision
 * into what a processor can do. It returns, rethrows, throws an `UnrecoverableError`, or moves the job to
 * delayed and throws a `DelayedError`. BullMQ's own lock renewal keeps the job while the pipeline waits,
 * so there is no timer to extend. A completion is written before the processor returns.
 */
export class BullMqPort<T> implements MessagePort<ActiveJob, ProcessorEnd> {
  readonly completionBeforeAck = true;
  readonly #parts: BullMqPortParts<T>;
  readonly #telemetry: MessageTelemetry<Job>;
  readonly #pipeline: MessagePipeline<ActiveJob, T, ProcessorEnd>;

  constructor(parts: BullMqPortParts<T>) {
    this.#parts = parts;
    const { idempotency, options } = parts;
    this.#telemetry = bullMqTelemetry(options.telemetry);
    this.#pipeline = new MessagePipeline<ActiveJob, T, ProcessorEnd>({
      idempotency,
      handler: parts.handler as never,
      port: this,
      gate: parts.gate,
      log: parts.log,
      stopping: parts.stopping,
      telemetry: { start: (active, scope) => this.#telemetry.start(active.job, scope) },
      options: {
        missingKey: options.missingKey,
        overrides: options.overrides,
        policy: {
          // BullMQ's `attempts` and `backoff` retry a handler error, so this backoff is unused.
          retryBackoff: {},
          maxConflictDelayMs: options.maxConflictDelayMs,
          maxAttempts: options.overrides.maxAttempts ?? idempotency.options.maxAttempts,
          isRetryable: idempotency.options.isRetryable,
        },
      },
    });
  }

  /** The lease of these jobs, in milliseconds. */
  get leaseMs(): number {
    return this.#pipeline.leaseMs;
  }

  /** Processes one job to what the processor does with it. Never rejects. */
  async process(job: Job, token: string | undefined): Promise<ProcessorEnd> {
    const active: ActiveJob = { job, token };
    // While the store does not answer, a job goes back to delayed without a claim.
    if (this.#parts.gate.closed && this.#parts.idempotency.options.storeFailureMode === 'closed') {
      return this.#notRun(active, 'store-unavailable');
    }
    try {
      return await this.#pipeline.process(active, this.#pipeline.prepare(active));
    } catch (error) {
      // The runner catches handler errors, so this is a bug. The job goes back, it does not fail.
      this.#parts.events.emit('storeError', this.storeError('process', error, active) as never);
      return this.#notRun(active, 'error');
    }
  }

  scopeOf(active: ActiveJob): string {
    return this.#parts.options.scope ?? active.job.queueName;
  }

  keyOf(active: ActiveJob): string | undefined {
    return this.#parts.options.idempotencyKey(active.job);
  }

  payloadOf(active: ActiveJob): Payload | undefined {
    return this.#parts.options.fingerprint?.(active.job);
  }

  handlerFields(active: ActiveJob): object {
    return { job: active.job, token: active.token };
  }

  subject(active: ActiveJob, fields: SubjectFields): MessageSubject {
    return { ...fields, source: sourceOf(active.job) };
  }

  storeError(operation: string, error: unknown, active: ActiveJob | undefined): object {
    const source = active && sourceOf(active.job);
    return { queue: source?.queue, operation, error, source };
  }

  warningWords(active: ActiveJob): WarningWords {
    return {
      where: `on queue ${active.job.queueName}`,
      keySource: 'by default the jobId the producer set; an id BullMQ counted itself is none',
      advice: ' Add jobs with a jobId, or pass idempotencyKey.',
      unacknowledged: `job ${active.job.id} goes back to delayed`,
      deadLetter: (reason) => `failed with an UnrecoverableError (reason ${reason})`,
    };
  }

  emit(name: string, payload: object): void {
    (this.#parts.events.emit as (name: string, payload: object) => void).call(
      this.#parts.events,
      name,
      payload,
    );
  }

  deliveryId(active: ActiveJob): string {
    return `${active.job.queueQualifiedName}/${active.job.id}`;
  }

  /** The failed runs BullMQ counted: a rethrown error moves `attemptsMade` on. */
  priorRuns(active: ActiveJob): number {
    return active.job.attemptsMade;
  }

  admission(): 'run' | 'stopping' {
    return this.#parts.stopping.aborted ? 'stopping' : 'run';
  }

  async carryOut(active: ActiveJob, end: MessageEnd<unknown>): Promise<CarriedOut<ProcessorEnd>> {
    const { events } = this.#parts;
    const decision = toBullMqDecision(end.decision, hasAttemptsLeft(active.job), end.subject.attempt);
    const subject = this.subject(active, end.subject);
    let result: ProcessorEnd;
    switch (decision.action) {
      case 'complete':
        result = { value: end.run && 'result' in end.run ? end.run.result : undefined };
        break;
      case 'retry':
      case 'fail':
        if (decision.action === 'retry') {
          const { reason, error } = decision;
          events.emit('retryScheduled', { ...subject, reason, delayMs: undefined, error });
        }
        result = { error: asError(decision.error) };
        break;
      case 'dead-letter':
        // The failed job is the dead letter. Marked first, a run after a crash fails it again.
        await end.markDeadLettered();
        events.emit('deadLettered', { ...subject, reason: decision.reason, error: decision.error });
        result = { error: deadLetterError(decision, subject) };
        break;
      case 'delay':
        if (decision.reason === 'conflict') {
          const { delayMs } = decision;
          events.emit('retryScheduled', { ...subject, reason: 'conflict', delayMs, error: undefined });
        }
        result = await this.#delay(active, decision);
        break;
    }
    end.span.brokerAction(decision.action);
    events.emit('settled', { ...subject, decision });
    const failure = end.decision.action === 'leave' && end.decision.reason === 'error';
    end.span.end(failure ? end.error : undefined);
    return { done: decision.action !== 'delay', result };
  }

  /** A job that goes back to delayed without a claim. */
  #notRun(active: ActiveJob, reason: LeaveReason): Promise<ProcessorEnd> {
    const scope = this.scopeOf(active);
    const span = this.#telemetry.start(active.job, scope);
    const subject = { scope, key: undefined, outcome: undefined, attempt: 0 };
    const decision = { action: 'leave', reason } as const;
    return this.carryOut(active, { decision, subject, span, markDeadLettered: async () => {} }).then(
      (carried) => carried.result,
    );
  }

  /**
   * Moves the job to delayed and ends the run with a `DelayedError`, which BullMQ takes as moved already.
   * When the move fails because the lock was lost or BullMQ's Redis does not answer, the job is left
   * active, and BullMQ's stalled check puts it back once its lock lapses.
   */
  async #delay(active: ActiveJob, decision: Extract<Decision, { action: 'delay' }>): Promise<ProcessorEnd> {
    const { job, token } = active;
    try {
      await job.moveToDelayed(Date.now() + decision.delayMs, token);
    } catch (error) {
      const source = sourceOf(job);
      this.#parts.events.emit('brokerError', {
        queue: source.queue,
        operation: 'moveToDelayed',
        error,
        source,
      });
    }
    return { error: new DelayedError(`delayed ${decision.delayMs} ms (${decision.reason})`) };
  }
}

/** Where a job came from. */
export function sourceOf(job: Job): BullMqSource {
  return { queue: job.queueName, jobId: job.id ?? '', attemptsMade: job.attemptsMade };
}

/** A thrown value as an `Error`, since BullMQ reads its `message`. */
function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
