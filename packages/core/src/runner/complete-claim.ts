import { ResultTooLargeError } from '../errors';
import type { RecordId } from '../keys';
import type { IdempotencyStore, WriteReply } from '../store/idempotency-store';
import type { EventSubject, IdempotencyEvents } from './events';
import type { ResolvedIdempotencyOptions } from './options';
import { encodeResult } from './result-codec';
import type { CompletedResult, ExecutionResult } from './run-result';

/** Emits one runner event, isolated from its listeners, as the runner's own emit does. */
export type RunnerEmit = <K extends keyof IdempotencyEvents>(
  name: K,
  ...payload: IdempotencyEvents[K]
) => void;

/** What {@link completeClaim} works with. The runner's store, options and isolated emit. */
export interface CompleteClaimRunner {
  readonly store: IdempotencyStore;
  readonly options: ResolvedIdempotencyOptions;
  readonly emit: RunnerEmit;
}

/**
 * Makes once more the write `Idempotency.execute` makes after a handler returned, for a run whose write was
 * not recorded. That run has `status: 'completed'` and `recorded: false`, because the store stayed
 * unavailable through the runner's `writeAttempts`. An adapter that keeps trying calls it instead of letting
 * the message go, as Kafka must not resolve an offset past an unwritten completion. It makes one try, with
 * the runner's own rules and events.
 * - The result is encoded as the runner does. Too large under `onResultTooLarge: 'omit'`, it completes
 *   without the result and emits `resultOmitted`. Too large under `'fail'`, or not serializable, it writes
 *   FAILED with a `ResultTooLargeError`.
 * - The write is fenced by the claim's token. Refused, it is `lease-lost` with a `leaseLost` event saying
 *   `write`. The result's `during` is `run.leaseLostDuring` when the keeper saw the claim lost while the
 *   handler ran, else `write`. A record already COMPLETED or FAILED under this very token is no refusal,
 *   since an earlier try that timed out on our side was applied.
 * - Written, it emits `completed` with `recorded: true`, the write the earlier event said was missing.
 *
 * @param durationMs - the handler's run time for the `completed` event, in milliseconds. By default
 *   `run.durationMs`, measured when the handler returned, since a late write does not change the run.
 * @returns the result the run would have had with the write recorded. `completed` with `recorded: true`,
 *   `failed` with `result-too-large`, or `lease-lost` with `handlerCompleted: true`.
 * @throws whatever the store call throws, after a `storeError` event, and the caller decides whether to try
 *   again. `StoreUnavailableError` when it does not answer; anything else is not an outage.
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
      // Where the claim was lost first. While the handler ran when the keeper saw it, with the runner's first
      // leaseLost event, else at this write.
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
        // As the runner's describeError words it, `Name [code]: message`, at most 1000 characters.
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
