import { createConnection, createServer } from 'node:net';

/** Resolves true when something accepts TCP connections on host:port within `timeoutMs`. */
export function isListening(port: number, host = '127.0.0.1', timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/** Polls `check` every `intervalMs` until it resolves true, or rejects after `timeoutMs`. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs = 15_000,
  intervalMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * `promise`'s outcome (as `Promise.allSettled` reports it), or a rejection when it has not settled after
 * `timeoutMs`: a bound for a promise that would otherwise hold the test until Jest's timeout.
 */
export async function settlesWithin<T>(
  what: string,
  promise: Promise<T>,
  timeoutMs = 10_000,
): Promise<PromiseSettledResult<T>> {
  let outcome: PromiseSettledResult<T> | undefined;
  void Promise.allSettled([promise]).then(([settled]) => {
    outcome = settled;
  });
  await waitFor(what, () => outcome !== undefined, timeoutMs);
  return outcome!;
}
