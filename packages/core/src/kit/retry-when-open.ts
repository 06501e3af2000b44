import { callIsolated } from './isolate';
import { isUnanswered, type StoreGate } from './store-gate';

/** What {@link tryUntilAnswered} is given: the consumer's gate, its stop signal, and where failures go. */
export interface StoreRetry {
  readonly gate?: StoreGate;
  readonly signal?: AbortSignal;
  readonly onStoreError?: (error: unknown) => void;
}

/**
 * The retrying layer the kit's `giveBackUnrun` and `recordCompletionLate` share: `call` is tried now (at
 * once when the gate is open or there is none; resolves once that try ends), or, while the gate is closed,
 * only once it opens (resolves at once). A try that rejects is reported through `onStoreError`
 * (isolated); a `STORE_UNAVAILABLE` one (from any copy of core) closes the gate when `failClosed`, and is
 * tried again each time the gate opens, in the background, until a try is answered, fails otherwise,
 * `signal` aborts or the gate is disposed. Without a gate, or while it stays open, there is one try (a
 * gate nobody closes would mean a try after every failure, at once). Never rejects.
 * @param failClosed - whether an unanswered try closes the gate (the runner's `storeFailureMode: 'closed'`).
 * @param call - one try; it resolves when the store answered, whatever the answer.
 * @internal
 */
export async function tryUntilAnswered(
  failClosed: boolean,
  call: () => Promise<unknown>,
  { gate, signal, onStoreError }: StoreRetry,
): Promise<void> {
  /** One try; resolves whether to try again once the gate opens. */
  const tryOnce = async (): Promise<boolean> => {
    try {
      await call();
      return false;
    } catch (error) {
      callIsolated(() => onStoreError?.(error));
      if (gate === undefined || gate.disposed || !isUnanswered(error)) return false;
      if (failClosed) gate.close(error);
      return gate.closed;
    }
  };
  const onceOpen = async (): Promise<void> => {
    while (!gate!.disposed && !signal?.aborted && (await gate!.waitUntilOpen(signal))) {
      if (!(await tryOnce())) return;
    }
  };
  if (gate?.closed) {
    void onceOpen();
    return;
  }
  if (await tryOnce()) void onceOpen();
}
