/**
 * OpenTelemetry for adapters, through the optional peer dependency `@opentelemetry/api`: a span per
 * message and the `idempotent-consumer` metrics (see the core README, "Telemetry").
 * @packageDocumentation
 */
export { type MessageSpan, NOOP_MESSAGE_SPAN } from './message-span';
export { type MessageHeaders, MessageTelemetry, type MessageTelemetryBinding } from './message-telemetry';
export { checkTelemetryOption, type TelemetryOptions } from './telemetry-options';
