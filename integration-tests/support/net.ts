import { type AddressInfo, createConnection, createServer, type Socket } from 'node:net';

/** Resolves true when something accepts TCP connections on host:port within `timeoutMs`. */
export function isListening(port: number, host = '127.0.0.1', timeoutMs = 3000): Promise<boolean> {
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

/** What {@link blackHole} gives a test. */
export interface BlackHole {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Resolves once a request's first bytes arrived (a client is waiting for an answer). */
  readonly requested: Promise<void>;
  /** Connections still open (a client that gave up on its request closes its own). */
  readonly open: number;
  /** Stops listening and ends every connection still open. */
  close(): Promise<void>;
}

/**
 * A TCP endpoint that accepts connections, reads what is sent and never answers: a black-holed HTTP
 * endpoint (an SQS endpoint behind a broken network path), whose requests end only when the client aborts.
 */
export async function blackHole(): Promise<BlackHole> {
  const sockets = new Set<Socket>();
  let onRequest!: () => void;
  const requested = new Promise<void>((resolve) => {
    onRequest = resolve;
  });
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', () => onRequest());
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requested,
    get open() {
      return sockets.size;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
