/**
 * `@idempotent-consumer/cli`, the `idempotent-consumer` operator's command. It inspects, lists, counts,
 * releases and purges the idempotency records in Redis. `runCli` runs it in-process, for tests and wrappers.
 * @packageDocumentation
 */
export { type CliIo, EXIT, processIo } from './io';
export { runCli } from './program';
export type { RecordView } from './record-view';
