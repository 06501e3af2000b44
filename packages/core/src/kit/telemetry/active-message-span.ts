import { performance } from 'node:perf_hooks';
import type { Context, Span } from '@opentelemetry/api';
import { describeError } from '../../runner/idempotency';
import type { RunResult } from '../../runner/run-result';
import {
  ATTR_IDEMPOTENCY_ATTEMPT,
  ATTR_IDEMPOTENCY_BROKER_ACTION,
  ATTR_IDEMPOTENCY_FENCING_TOKEN,
  ATTR_IDEMPOTENCY_KEY,
  ATTR_IDEMPOTENCY_OUTCOME,
} from './attributes';
import type { TelemetryDestination } from './destination';
import type { TelemetryInstruments } from './instruments';
import type { OpenTelemetryApi } from './load-api';
import type { MessageSpan } from './message-span';

/** What a recording (or context-carrying) message span is made of. */
export interface MessageSpanParts {
  readonly api: OpenTelemetryApi;
  readonly span: Span;
  /** `span.isRecording()`: attributes are set only then. */
  readonly recording: boolean;
  /** The context holding `span`, the handler runs in. */
  readonly context: Context;
  /** The instruments, `undefined` when metrics are off. */
  readonly instruments: TelemetryInstruments | undefined;
  readonly destination: TelemetryDestination;
  readonly includeIdempotencyKey: boolean;
}

/** The {@link MessageSpan} of a message whose span records, carries a trace context, or whose metrics count. */
export class ActiveMessageSpan implements MessageSpan {
  readonly #parts: MessageSpanParts;
  /** When the current claim round trip started (`performance.now()`). */
  #claimStartedAt = performance.now();
  /**
   * The claim round trip that ended when the handler started, in seconds, recorded by `result()` only
   * when the run had a claim (an `UNPROTECTED` run made no store round trip worth counting).
   */
  #claimSeconds: number | undefined;
  #handlerStartedAt: number | undefined;
  #handlerEndedAt: number | undefined;
  /** Counts handler runs and results: a run's end counts as the handler's end only while it is unchanged. */
  #round = 0;
  /** Whether this message counts in `idempotency.in_flight` now. */
  #holding = false;
  /** The error of the last result's handler, or of the adapter; `failed` says whether there is one. */
  #error: unknown;
  #failed = false;
  #ended = false;

  constructor(parts: MessageSpanParts) {
    this.#parts = parts;
  }

  run<R>(fn: () => R): R {
    return this.#parts.api.context.with(this.#parts.context, fn);
  }

  timeHandler<R>(fn: () => R | Promise<R>): Promise<R> {
    const startedAt = performance.now();
    this.#handlerStartedAt = startedAt;
    this.#handlerEndedAt = undefined;
    const round = ++this.#round;
    const { instruments, destination } = this.#parts;
    if (instruments) {
      this.#claimSeconds = (startedAt - this.#claimStartedAt) / 1000;
      safely(() => {
        if (!this.#holding) instruments.inFlight.add(1, destination.base);
      });
      this.#holding = true;
    }
    return this.#timed(fn, startedAt, round);
  }

  /**
   * Runs the handler started at `startedAt` in `round` and records its run time when it settles. The
   * start is this run's own, not `#handlerStartedAt`: a handler past `handlerTimeoutMs` returns after the
   * runner's result (which clears the field), or while the handler of an inline retry runs (which
   * replaced it). Its end is the end of the current run only while no result or other run came in
   * between; otherwise the next `result()` would take it for the end of its own handler (a `write`
   * sample from it).
   */
  async #timed<R>(fn: () => R | Promise<R>, startedAt: number, round: number): Promise<R> {
    try {
      return await fn();
    } finally {
      const endedAt = performance.now();
      if (this.#round === round) this.#handlerEndedAt = endedAt;
      const { instruments, destination } = this.#parts;
      if (instruments) {
        safely(() => instruments.handlerDuration.record((endedAt - startedAt) / 1000, destination.base));
      }
    }
  }

  claiming(): void {
    this.#claimStartedAt = performance.now();
  }

  result(result: RunResult<unknown>, key?: string): void {
    const now = performance.now();
    const { instruments, destination, recording, span } = this.#parts;
    const error = handlerError(result);
    this.#failed = error !== NO_ERROR;
    this.#error = this.#failed ? error : undefined;
    safely(() => {
      if (instruments) {
        // A run without a claim (UNPROTECTED) made no claim or write round trip: no store sample.
        if (result.outcome !== 'UNPROTECTED') {
          if (this.#claimSeconds !== undefined) {
            instruments.storeDuration.record(this.#claimSeconds, destination.claim);
          }
          if (this.#handlerEndedAt !== undefined) {
            instruments.storeDuration.record((now - this.#handlerEndedAt) / 1000, destination.write);
          } else if (this.#handlerStartedAt === undefined) {
            instruments.storeDuration.record((now - this.#claimStartedAt) / 1000, destination.claim);
          }
        }
        instruments.outcomes.add(1, destination.outcome(result.outcome));
        if (this.#holding) instruments.inFlight.add(-1, destination.base);
      }
      if (recording) {
        span.setAttribute(ATTR_IDEMPOTENCY_OUTCOME, result.outcome);
        if ('attempt' in result) span.setAttribute(ATTR_IDEMPOTENCY_ATTEMPT, result.attempt);
        if ('fencingToken' in result) span.setAttribute(ATTR_IDEMPOTENCY_FENCING_TOKEN, result.fencingToken);
        if (key !== undefined && this.#parts.includeIdempotencyKey)
          span.setAttribute(ATTR_IDEMPOTENCY_KEY, key);
        if (this.#failed) recordException(span, error);
      }
    });
    this.#holding = false;
    this.#round++;
    this.#claimSeconds = undefined;
    this.#handlerStartedAt = undefined;
    this.#handlerEndedAt = undefined;
    this.#claimStartedAt = now;
  }

  brokerAction(action: string): void {
    const { instruments, destination, recording, span } = this.#parts;
    safely(() => {
      if (recording) span.setAttribute(ATTR_IDEMPOTENCY_BROKER_ACTION, action);
      instruments?.brokerActions.add(1, destination.action(action));
    });
  }

  end(error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    const { instruments, destination, recording, span, api } = this.#parts;
    safely(() => {
      if (this.#holding) instruments?.inFlight.add(-1, destination.base);
      this.#holding = false;
      if (recording) {
        if (error !== undefined) {
          recordException(span, error);
          this.#failed = true;
          this.#error = error;
        }
        if (this.#failed) {
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: describeError(this.#error) });
        }
      }
      span.end();
    });
  }
}

/** Marks "no handler error" apart from a handler that threw `undefined`. */
const NO_ERROR: unique symbol = Symbol('no handler error');

/** What the handler threw in this result, {@link NO_ERROR} when it did not run or did not throw. */
function handlerError(result: RunResult<unknown>): unknown {
  if (!('status' in result)) return NO_ERROR; // settled without running (a FAILED record's error is old)
  switch (result.status) {
    case 'threw':
    case 'released':
    case 'failed':
      return result.error;
    case 'lease-lost':
      return result.handlerStarted && !result.handlerCompleted ? result.error : NO_ERROR;
    default:
      return NO_ERROR;
  }
}

/** Records `error` as an exception event; never throws, whatever was thrown. */
function recordException(span: Span, error: unknown): void {
  try {
    span.recordException(error instanceof Error ? error : describeError(error));
  } catch {
    span.recordException(describeError(error));
  }
}

/** Runs telemetry code: an SDK or exporter bug never reaches the consumer. */
function safely(fn: () => void): void {
  try {
    fn();
  } catch {
    // Telemetry must not change what the broker sees.
  }
}
