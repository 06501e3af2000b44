import type { RunResult } from '../../runner/run-result';

/**
 * The telemetry of one message, from its arrival to its broker decision (`MessageTelemetry.start`): its
 * consumer span and its share of the metrics. Every method is cheap and never throws; on
 * {@link NOOP_MESSAGE_SPAN} (telemetry off, or nothing records) each does nothing.
 */
export interface MessageSpan {
  /** Runs `fn` with the message's span as the active span (the handler's own spans become its children). */
  run<R>(fn: () => R): R;
  /**
   * Runs the handler, timing it (`idempotency.handler.duration`): the claim is held from here until
   * {@link MessageSpan.result} (`idempotency.in_flight`), and the claim round trip ends here.
   */
  timeHandler<R>(fn: () => R | Promise<R>): R | Promise<R>;
  /** A claim starts now (a claim again after an inline retry): the next claim round trip counts from here. */
  claiming(): void;
  /**
   * The runner's result for the message: sets `idempotency.outcome`, `idempotency.attempt`,
   * `idempotency.fencing_token` (and `idempotency.key` when enabled) on the span, records an exception
   * when the handler threw, counts `idempotency.outcomes`, ends the store round trip. The claim and write
   * durations (`idempotency.store.duration`) are recorded here, none for an `UNPROTECTED` run (no claim).
   */
  result(result: RunResult<unknown>, key?: string): void;
  /** The decision carried out on the broker (the adapter's `Decision` action name); counts `idempotency.broker_actions`. */
  brokerAction(action: string): void;
  /**
   * Ends the span: status ERROR when the last result's handler threw, or `error` is given (an error of the
   * adapter itself). Later calls do nothing.
   */
  end(error?: unknown): void;
}

/** The {@link MessageSpan} that does nothing: telemetry is off, or nothing records. */
export const NOOP_MESSAGE_SPAN: MessageSpan = Object.freeze({
  run: <R>(fn: () => R): R => fn(),
  timeHandler: <R>(fn: () => R | Promise<R>): R | Promise<R> => fn(),
  claiming: () => {},
  result: () => {},
  brokerAction: () => {},
  end: () => {},
});
