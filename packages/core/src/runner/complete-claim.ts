import { ResultTooLargeError } from '../errors';
import type { RecordId } from '../keys';
import type { IdempotencyStore, WriteReply } from '../store/idempotency-store';
import type { EventSubject, IdempotencyEvents } from './events';
import type { ResolvedIdempotencyOptions } from './options';
import { encodeResult } from './result-codec';
import type { CompletedResult, ExecutionResult } from './run-result';

/** Emits one runner event, isolated from its listeners (the runner's own emit). */
export type RunnerEmit = <K extends keyof IdempotencyEvents>(
  name: K,
  ...payload: IdempotencyEvents[K]
) => void;

/** What {@link completeClaim} works with: the runner's store, options and isolated emit. */
export interface CompleteClaimRunner {
  readonly store: IdempotencyStore;
  readonly options: ResolvedIdempotencyOptions;
  readonly emit: RunnerEmit;
}

/**
 * The write `Idempotency.execute` makes after a handler returned, made once more for a run whose write
 * was not recorded (`status: 'completed'`, `recorded: false`: the store stayed unavailable through the
 * runner's `writeAttempts`), by an adapter that keeps trying instead of letting the message go (Kafka must
 * not resolve an offset past an unwritten completion). One try, with the runner's own rules and events:
 *
 * - the result is encoded as the runner does (`maxResultBytes`, `compressAboveBytes`): too large under
 *   `onResultTooLarge: 'omit'` completes without it (the `resultOmitted` event, and `resultOmitted: true`
 *   on the result); too large under `'fail'`, or not serializable, writes FAILED with a
 *   `ResultTooLargeError` (`failed`, reason `result-too-large`);
 * - the write is fenced by the claim's token: refused, it is `lease-lost` (`leaseLost`, `during: 'write'`;
 *   the result's `during` is `run.leaseLostDuring` when the keeper had seen the claim lost while the
 *   handler ran, else `write`), unless the record is already COMPLETED (or FAILED) under this very token (an earlier try that timed
 *   out on our side was applied);
 * - written, it emits `completed` with `recorded: true` (the write the earlier `recorded: false` event
 *   said was missing).
 *
 * @param durationMs - the handler's run time for the `completed` event, in milliseconds; by default
 *   `run.durationMs`, what the runner measured when the handler returned (the write landing later does not
 *   make the handler's run any longer or shorter).
 * @returns the result the run would have had with the write recorded: `completed` (`recorded: true`),
 *   `failed` (`result-too-large`, `recorded: true`) or `lease-lost` (`handlerCompleted: true`).
 * @throws whatever the store call throws (`StoreUnavailableError` when it does not answer; anything else
 *   is not an outage), after a `storeError` event: the caller decides whether to try again.
 */
export async function completeClaim<T>(
  runner: CompleteClaimRunner,
  request: RecordId,
  run: CompletedResult<T>,
  durationMs = run.durationMs,
): Promise<ExecutionResult<T>> {
  const { store, options, emit } = runner;
  const id: RecordId = { scope: request.scope, key: request.key };
  const subject: EventSubject = id;
  const { outcome, fencingToken, attempt } = run;
  const base = { outcome, fencingToken, attempt } as const;
  let encoded: ReturnType<typeof encodeResult>;
  let tooLarge: ResultTooLargeError | undefined;
  try {
    encoded = encodeResult(run.result, options);
  } catch (error) {
    encoded = { kind: 'too-large', bytes: Number.NaN };
    tooLarge = new ResultTooLargeError('The handler result cannot be serialized as JSON', { cause: error });
  }
  if (encoded.kind === 'too-large' && tooLarge === undefined) {
    if (options.onResultTooLarge === 'omit') {
      emit('resultOmitted', { ...subject, bytes: encoded.bytes, maxResultBytes: options.maxResultBytes });
    } else {
      tooLarge = new ResultTooLargeError(
        `The handler result is ${encoded.bytes} bytes encoded; maxResultBytes is ${options.maxResultBytes}`,
      );
    }
  }
  const write = async (operation: 'complete' | 'fail', call: () => Promise<WriteReply>) => {
    let reply: WriteReply;
    try {
      reply = await call();
    } catch (error) {
      emit('storeError', { operation, error, subject });
      throw error;
    }
    if (reply.ok) return true;
    const target = operation === 'complete' ? 'COMPLETED' : 'FAILED';
    return reply.currentFencingToken === fencingToken && reply.state === target;
  };
  const lost = (error: unknown): ExecutionResult<T> => {
    emit('leaseLost', { ...subject, fencingToken, during: 'write' });
    return {
      ...base,
      status: 'lease-lost',
      // Where the claim was lost first: while the handler ran when the keeper saw it (the runner's first
      // leaseLost event), else at this write.
      during: run.leaseLostDuring ?? 'write',
      handlerStarted: true,
      handlerCompleted: true,
      result: tooLarge ? undefined : run.result,
      error,
    };
  };
  if (tooLarge) {
    const error = tooLarge;
    const ok = await write('fail', () =>
      store.fail(id, fencingToken, {
        retentionMs: options.retentionMs,
        // As the runner's describeError words it (`Name [code]: message`), at most 1000 characters.
        error: `${error.name} [${error.code}]: ${error.message}`.slice(0, 1000),
      }),
    );
    if (!ok) return lost(error);
    emit('failed', { ...subject, attempt, fencingToken, error, reason: 'result-too-large', recorded: true });
    return { ...base, status: 'failed', error, reason: 'result-too-large', recorded: true };
  }
  const result = encoded.kind === 'stored' ? encoded.value : undefined;
  const ok = await write('complete', () =>
    store.complete(id, fencingToken, { retentionMs: options.retentionMs, result }),
  );
  if (!ok) return lost(undefined);
  emit('completed', { ...subject, attempt, fencingToken, durationMs, recorded: true });
  const resultOmitted = encoded.kind === 'too-large';
  return { ...base, status: 'completed', result: run.result, recorded: true, resultOmitted, durationMs };
}
