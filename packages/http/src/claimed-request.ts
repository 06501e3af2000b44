import { type HandlerContext, ResultTooLargeError, type RunResult } from '@idempotent-consumer/core';
import type { FinishedResponse } from './finished-response';
import type { ResolvedHttpOptions } from './options';
import { type HttpAnswer, problemAnswer } from './problem';
import { ServerErrorResponse } from './server-error-response';
import { type StoredResponse, storeResponse } from './stored-response';

/** What the runner settles a claimed request with. */
export type ClaimedRunResult = RunResult<StoredResponse | undefined>;

/**
 * One claimed request whose handler runs (the draft's request "being processed"). The binding captures
 * the handler's response and calls {@link ClaimedRequest.finish} once, before anything is sent, so the
 * record is written before the client sees the answer (a retry after the answer finds the key completed
 * or released, never in progress).
 */
export class ClaimedRequest {
  #finished = false;
  #settle!: (value: StoredResponse | undefined) => void;
  #fail!: (error: unknown) => void;
  /** What the runner's handler returns: settled by {@link ClaimedRequest.finish}. */
  readonly #response: Promise<StoredResponse | undefined>;

  /** @internal Built by `HttpIdempotency.admit`. */
  constructor(
    /** The options of the binding that admitted the request. */
    readonly options: ResolvedHttpOptions<never>,
    /** The claim's context (fencing token, attempt, outcome, lease signal), exposed on the request. */
    readonly context: HandlerContext,
    /** The runner's result for this request, once `finish` settled its handler. */
    private readonly result: () => Promise<ClaimedRunResult>,
  ) {
    this.#response = new Promise<StoredResponse | undefined>((resolve, reject) => {
      this.#settle = resolve;
      this.#fail = reject;
    });
  }

  /** @internal The runner's handler: resolves with the stored form once `finish` is called. */
  handled(): Promise<StoredResponse | undefined> {
    return this.#response;
  }

  /**
   * Records how the handler ended: a 5xx answer, or a `failed` response, releases the key
   * (`ServerErrorResponse`, or the error the framework reported, which the runner's `isRetryable` may
   * turn into FAILED); an `uncaptured` answer completes it without a stored response (reported to
   * `onResponseNotStored`, as a body above `maxResponseBytes` is); any other answer completes it with the
   * stored response; a body above `maxResponseBytes` follows `onResponseTooLarge`. A stored form above
   * the runner's `maxResultBytes` follows the runner's `onResultTooLarge`: `'omit'` completes the key
   * without it (the handler's answer is sent; reported to `onResponseNotStored`), `'fail'` records it
   * FAILED and answers 500 `response-too-large` instead (reported too).
   * Resolves once the record is written (or every write attempt failed), with the answer to send instead
   * of the handler's, or `undefined` to send the handler's own. Never rejects.
   */
  async finish(finished: FinishedResponse): Promise<HttpAnswer | undefined> {
    if (this.#finished) return undefined;
    this.#finished = true;
    const o = this.options;
    let replacement: HttpAnswer | undefined;
    if (finished.status >= 500 || finished.failed) {
      this.#fail(finished.error ?? new ServerErrorResponse(Math.max(finished.status, 500)));
    } else if (finished.uncaptured) {
      this.#notStored(finished);
      this.#settle(undefined);
    } else if (finished.body === undefined || finished.bytes > o.maxResponseBytes) {
      this.#notStored(finished);
      if (o.onResponseTooLarge === 'fail') {
        const detail = `The response body passed maxResponseBytes (${o.maxResponseBytes} bytes); it was not sent and cannot be replayed`;
        this.#fail(new ResultTooLargeError(detail));
        replacement = problemAnswer(o.problemTypeBaseUri, 'response-too-large', detail);
      } else {
        this.#settle(undefined);
      }
    } else {
      this.#settle(storeResponse(finished.status, finished.headers, finished.body, o.replayHeaders));
      return this.#stored(finished, await this.result().catch(() => undefined));
    }
    await this.result().catch(() => undefined);
    return replacement;
  }

  /** The answer for a response given to the runner to store, once the runner settled. */
  #stored(finished: FinishedResponse, settled: ClaimedRunResult | undefined): HttpAnswer | undefined {
    if (settled && 'resultOmitted' in settled && settled.resultOmitted) {
      // The runner's `onResultTooLarge: 'omit'` (its default) completed the key without the response
      // (its stored form passed `maxResultBytes`, though the body was within `maxResponseBytes`): the
      // handler's answer goes out, later requests get 409 `response-not-stored`, and it is reported.
      this.#notStored(finished);
      return undefined;
    }
    if (
      settled &&
      'status' in settled &&
      settled.status === 'failed' &&
      settled.reason === 'result-too-large'
    ) {
      // The runner's `onResultTooLarge: 'fail'` recorded FAILED (the stored form passed its
      // `maxResultBytes`): answered as `onResponseTooLarge: 'fail'` answers, so the client is not told
      // 201 while every retry is told the operation failed.
      this.#notStored(finished);
      return problemAnswer(
        this.options.problemTypeBaseUri,
        'response-too-large',
        "The response passed the idempotency store's result limit; it was not sent and cannot be replayed",
      );
    }
    return undefined;
  }

  /** Calls `onResponseNotStored`: a completion without a stored response is never silent. */
  #notStored(finished: FinishedResponse): void {
    const { scope, key } = this.context;
    try {
      this.options.onResponseNotStored?.({ scope, key, status: finished.status, bytes: finished.bytes });
    } catch {
      // A listener's bug must not change the answer.
    }
  }
}

/**
 * @deprecated Renamed {@link ClaimedRequest} (an "exchange" is AMQP's word for where messages are
 * published); this alias goes in the next major version.
 */
export const Exchange = ClaimedRequest;
/** @deprecated Renamed {@link ClaimedRequest}. */
export type Exchange = ClaimedRequest;
