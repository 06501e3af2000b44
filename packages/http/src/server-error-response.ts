/**
 * The handler answered with a 5xx status. Given to the runner as the handler's error, so the key is
 * released (a retry runs again) or, on the last attempt, recorded FAILED; it appears in the runner's
 * `released` and `failed` events. It is never thrown to the application. Retryable.
 */
export class ServerErrorResponse extends Error {
  override readonly name = 'ServerErrorResponse' as const;
  /** Whether trying again can succeed: true, as for any 5xx answer. */
  readonly retryable = true;

  /** @param status - the 5xx status code the handler answered with. */
  constructor(readonly status: number) {
    super(`The handler answered ${status}`);
  }
}
