/**
 * `@idempotent-consumer/core/tools`: pieces for tools that read or write records beside the library, such
 * as the CLI and the bench: the stored result's codec, the store's write coalescing, and a URL with its
 * password hidden. A consumer's code imports `@idempotent-consumer/core`; a broker port imports
 * `@idempotent-consumer/core/kit`.
 * @packageDocumentation
 */

export { redactUrl } from '../kit/redact-url';
export { decodeResult, type EncodedResult, encodeResult, type ResultOptions } from '../runner/result-codec';
export { SCRIPT_NUMBER_OF_KEYS } from '../store/scripts';
export {
  type CorkableStream,
  DEFAULT_MAX_COMMANDS_PER_WRITE,
  WriteCoalescer,
} from '../store/write-coalescer';
