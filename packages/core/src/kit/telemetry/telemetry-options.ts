import { InvalidOptionError } from '../../errors';

/**
 * Any OpenTelemetry `TracerProvider` (from `@opentelemetry/api`, an SDK's `BasicTracerProvider` or
 * `NodeTracerProvider`): described by the one method used, so that these types do not need the API
 * installed.
 */
export interface TracerProviderLike {
  /** Returns the tracer of an instrumentation scope (`idempotent-consumer`). */
  getTracer(name: string, version?: string): unknown;
}

/** Any OpenTelemetry `MeterProvider` (from `@opentelemetry/api` or an SDK's `MeterProvider`). */
export interface MeterProviderLike {
  /** Returns the meter of an instrumentation scope (`idempotent-consumer`). */
  getMeter(name: string, version?: string): unknown;
}

/**
 * OpenTelemetry options of an adapter (`telemetry`), the same in every adapter. Telemetry needs the
 * optional peer dependency `@opentelemetry/api`; without it the adapter runs without telemetry. The
 * spans, metrics and attributes are listed in the core README, "Telemetry".
 */
export interface TelemetryOptions {
  /**
   * Where spans go. @defaultValue the global provider of `@opentelemetry/api` (`trace.getTracerProvider()`:
   * a no-op until the application registers an SDK, at any time)
   */
  readonly tracerProvider?: TracerProviderLike;
  /**
   * Where metrics go. @defaultValue the global provider of `@opentelemetry/api`
   * (`metrics.getMeterProvider()`), as registered when the first message arrives: a no-op when the
   * application registered no SDK by then
   */
  readonly meterProvider?: MeterProviderLike;
  /**
   * Put the idempotency key on spans (`idempotency.key`). Off by default: keys may be personal data (an
   * e-mail address, an order number). Never on metrics (unbounded cardinality). @defaultValue false
   */
  readonly includeIdempotencyKey?: boolean;
}

/**
 * Checks an adapter's `telemetry` option: `undefined` (the global providers), `false` (no telemetry) or a
 * {@link TelemetryOptions}.
 * @throws {@link InvalidOptionError} naming `name` when it is something else, a provider lacks its
 *   `getTracer`/`getMeter`, or `includeIdempotencyKey` is not a boolean.
 */
export function checkTelemetryOption(name: string, value: unknown): TelemetryOptions | false | undefined {
  if (value === undefined || value === false) return value;
  if (value === null || typeof value !== 'object') {
    throw new InvalidOptionError(
      `${name} must be false or { tracerProvider?, meterProvider?, includeIdempotencyKey? }`,
    );
  }
  const options = value as TelemetryOptions;
  if (
    options.tracerProvider !== undefined &&
    typeof (options.tracerProvider as Partial<TracerProviderLike>)?.getTracer !== 'function'
  ) {
    throw new InvalidOptionError(`${name}.tracerProvider must be a TracerProvider (with getTracer)`);
  }
  if (
    options.meterProvider !== undefined &&
    typeof (options.meterProvider as Partial<MeterProviderLike>)?.getMeter !== 'function'
  ) {
    throw new InvalidOptionError(`${name}.meterProvider must be a MeterProvider (with getMeter)`);
  }
  if (options.includeIdempotencyKey !== undefined && typeof options.includeIdempotencyKey !== 'boolean') {
    throw new InvalidOptionError(`${name}.includeIdempotencyKey must be a boolean`);
  }
  return options;
}
