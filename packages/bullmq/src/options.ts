import {
  type BackoffOptions,
  InvalidOptionError,
  type Payload,
  type RunOverrides,
  type TelemetryOptions,
} from '@idempotent-consumer/core';
import { check } from '@idempotent-consumer/core/kit';
import type { Job } from 'bullmq';

/** Reads the idempotency key of a job; `undefined` or `''` when it has none. */
export type IdempotencyKeyExtractor = (job: Job) => string | undefined;

/**
 * The default key is the job id a producer set with `jobId`. A job added without one has BullMQ's counter
 * as its id, decimal digits that BullMQ refuses as a custom id, and a queue obliterated and made again
 * counts from 1 once more. Such an id is no key.
 */
export const defaultIdempotencyKey: IdempotencyKeyExtractor = (job) => {
  const id = job.id;
  return id === undefined || /^\d+$/.test(id) ? undefined : id;
};

/**
 * Options of {@link idempotentProcessor}. Every field has a default; see each `@defaultValue`. The runner
 * overrides `leaseMs`, `maxAttempts` and `handlerTimeoutMs` are the kit's `RunOverrides`, as in the other
 * adapters. The behaviour is the BullMQ column of docs/design.md#outcome-to-broker-action.
 */
export interface BullMqIdempotencyOptions extends RunOverrides {
  /** Namespace of the idempotency keys (docs/design.md#vocabulary). @defaultValue the job's queue name */
  readonly scope?: string;
  /**
   * Reads a job's idempotency key. One that throws makes the job an `invalid-key` dead letter.
   * @defaultValue the `jobId` the producer set ({@link defaultIdempotencyKey})
   */
  readonly idempotencyKey?: IdempotencyKeyExtractor;
  /**
   * For a job without a key, `dead-letter` fails it as `missing-key` without running the handler, and
   * `process` runs the handler without a claim, as `UNPROTECTED`, at most `maxAttempts` runs.
   * Either way a `missingKey` event is emitted. @defaultValue `'dead-letter'`
   */
  readonly missingKey?: 'dead-letter' | 'process';
  /**
   * What is fingerprinted with the key, so that the same key with other data is a `PAYLOAD_MISMATCH`.
   * `true` takes the job's `data` as canonical JSON, `false` nothing, a function what it returns.
   * @defaultValue true
   */
  readonly fingerprint?: boolean | ((job: Job) => Payload | undefined);
  /**
   * How long a job whose key another worker holds waits for the holder's outcome, in milliseconds, before
   * it is moved to delayed, with `Idempotency.waitForOutcome`. The holder's completion answers DUPLICATE
   * StopSignal.within milliseconds. The job keeps its concurrency slot meanwhile. 0 means no wait. @defaultValue 5000
   */
  readonly conflictWaitMs?: number;
  /**
   * The longest delay of a job still in CONFLICT after `conflictWaitMs`, in milliseconds. It is delayed
   * for `min(holder's remaining lease, maxConflictDelayMs)`. @defaultValue 5000
   */
  readonly maxConflictDelayMs?: number;
  /**
   * Delay between store probes while the store does not answer and attached workers are paused, by probe
   * number. @defaultValue `{ baseMs: 250, factor: 2, maxMs: 5000, jitter: 'full' }`
   */
  readonly storeProbeBackoff?: BackoffOptions;
  /**
   * OpenTelemetry, a span per job and the `idempotent-consumer` metrics of the core README's "Telemetry",
   * through the optional peer dependency `@opentelemetry/api`. `false` turns it off.
   * @defaultValue the global tracer and meter providers of `@opentelemetry/api`
   */
  readonly telemetry?: TelemetryOptions | false;
}

/** {@link BullMqIdempotencyOptions} with defaults applied. */
export interface ResolvedBullMqOptions {
  readonly scope: string | undefined;
  readonly idempotencyKey: IdempotencyKeyExtractor;
  readonly missingKey: 'dead-letter' | 'process';
  readonly fingerprint: ((job: Job) => Payload | undefined) | undefined;
  readonly overrides: RunOverrides & { readonly conflictWaitMs: number };
  readonly maxConflictDelayMs: number;
  readonly storeProbeBackoff: BackoffOptions;
  readonly telemetry: TelemetryOptions | false | undefined;
}

const jobData = (job: Job): Payload => (job.data ?? null) as Payload;

/**
 * Applies defaults and checks ranges.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when an option is out of range.
 */
export function resolveBullMqOptions(options: BullMqIdempotencyOptions = {}): ResolvedBullMqOptions {
  const fp = options.fingerprint ?? true;
  if (typeof fp !== 'boolean' && typeof fp !== 'function') {
    throw new InvalidOptionError('fingerprint must be a boolean or a function of the job');
  }
  const { leaseMs, maxAttempts, handlerTimeoutMs } = check.runOverrides({ ...options });
  return {
    scope: options.scope === undefined ? undefined : check.nonEmptyString('scope', options.scope),
    idempotencyKey: check.function('idempotencyKey', options.idempotencyKey, defaultIdempotencyKey),
    missingKey: check.oneOf('missingKey', options.missingKey, ['dead-letter', 'process'], 'dead-letter'),
    fingerprint: fp === true ? jobData : fp === false ? undefined : fp,
    overrides: {
      leaseMs,
      maxAttempts,
      handlerTimeoutMs,
      conflictWaitMs: check.nonNegativeInteger('conflictWaitMs', options.conflictWaitMs, 5000),
    },
    maxConflictDelayMs: check.positiveInteger('maxConflictDelayMs', options.maxConflictDelayMs, 5000),
    storeProbeBackoff: check.storeProbeBackoff(options.storeProbeBackoff),
    telemetry: check.telemetry('telemetry', options.telemetry),
  };
}
