import type * as Api from '@opentelemetry/api';

/** The `@opentelemetry/api` module, as `require` returns it. */
export type OpenTelemetryApi = typeof Api;

/** The module id {@link loadOpenTelemetryApi} loads. */
export const OPENTELEMETRY_API_MODULE = '@opentelemetry/api';

/**
 * Loads `@opentelemetry/api`, an optional peer dependency: `undefined` when it cannot be loaded (not
 * installed, or `load` throws for any other reason) or does not look like the API (no `trace`,
 * `metrics`, `propagation` and `context`), so that the adapters work without it. Never throws.
 * @param load - how the module is loaded; the CommonJS `require` of this package by default (tests pass
 *   one that throws to see the packages work without the API).
 */
export function loadOpenTelemetryApi(
  load: (id: string) => unknown = defaultLoad,
): OpenTelemetryApi | undefined {
  try {
    const api = load(OPENTELEMETRY_API_MODULE) as Partial<OpenTelemetryApi> | undefined;
    if (
      typeof api?.trace?.getTracerProvider !== 'function' ||
      typeof api.metrics?.getMeterProvider !== 'function' ||
      typeof api.propagation?.extract !== 'function' ||
      typeof api.context?.with !== 'function'
    ) {
      return undefined;
    }
    return api as OpenTelemetryApi;
  } catch {
    return undefined;
  }
}

/** `require`, resolved from this package (and so from the application that installed it). */
function defaultLoad(id: string): unknown {
  return require(id);
}
