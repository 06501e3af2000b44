/**
 * OpenTelemetry for adapters, through the optional peer dependency `@opentelemetry/api`: a span per
 * message and the `idempotent-consumer` metrics (see the core README, "Telemetry").
 * @packageDocumentation
 */
export * from './attributes';
export { type CarrierGetter, type HeaderCarrier, headerCarrierGetter, textOf } from './carrier-getter';
export { type MessageSpan, NOOP_MESSAGE_SPAN } from './message-span';
export { type AttributeSink, MessageTelemetry, type MessageTelemetryBinding } from './message-telemetry';
export {
  INSTRUMENTATION_SCOPE,
  METRIC_BROKER_ACTIONS,
  METRIC_HANDLER_DURATION,
  METRIC_IN_FLIGHT,
  METRIC_OUTCOMES,
  METRIC_STORE_DURATION,
} from './metric-names';
export {
  checkTelemetryOption,
  type MeterProviderLike,
  type TelemetryOptions,
  type TracerProviderLike,
} from './telemetry-options';
