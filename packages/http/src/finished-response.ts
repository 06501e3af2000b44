import type { OutgoingHeaders } from './stored-response';

/** The response a handler produced, as the binding captured it. */
export interface FinishedResponse {
  readonly status: number;
  readonly headers: OutgoingHeaders;
  /** The whole body; `undefined` when it passed `maxResponseBytes` and was not buffered to the end. */
  readonly body: Buffer | undefined;
  /** Body bytes seen (at least `maxResponseBytes + 1` when `body` is `undefined`). */
  readonly bytes: number;
  /** The error the handler threw, when the framework reported one (used for 5xx answers). */
  readonly error?: unknown;
  /**
   * The handler failed after its response started going out, so no error answer could replace it (Express
   * then destroys the connection): the key is released as for a 5xx answer, or recorded FAILED when
   * `error` is not retryable.
   */
  readonly failed?: boolean;
  /**
   * The handler sent the response itself, past the capture (Fastify `reply.hijack()`), or the client went
   * away before its body stream ended, so there is nothing to store: an answer below 500 completes the key
   * without a stored response whatever `onResponseTooLarge` says (later requests get 409
   * `response-not-stored`; `onResponseNotStored` is called, with `bytes` 0: nothing was counted); a 5xx
   * releases it.
   */
  readonly uncaptured?: boolean;
}
