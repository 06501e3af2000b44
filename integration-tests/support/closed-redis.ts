import type { IdempotencyLogger } from '@idempotent-consumer/core';
import Redis from 'ioredis';

/** A logger that keeps what it was given (`debug` lines prefixed with `debug `). */
export function recordingLogger(): IdempotencyLogger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    warn: (message) => lines.push(message),
    error: (message) => lines.push(message),
    debug: (message) => lines.push(`debug ${message}`),
  };
}

/** What {@link withClosedRedis} hands to its body. */
export interface ClosedRedis {
  /** An ioredis client for a loopback port nothing listens on (it keeps trying to reconnect). */
  readonly redis: Redis;
  /** That port. */
  readonly port: number;
  /** Every line written to `console.error`, `console.warn` and `console.log` while the body ran. */
  readonly printed: string[];
}

/**
 * Runs `body` against a Redis URL that points at a closed port (the "wrong Redis URL" of a new user), with
 * the console captured instead of printed, so a test can assert that nothing floods it. Restores the
 * console and disconnects the client afterwards, whatever the body did.
 */
export async function withClosedRedis<T>(body: (closed: ClosedRedis) => Promise<T>): Promise<T> {
  // A privileged port nothing listens on: unlike a port picked free a moment ago, no test file running at
  // the same time (Jest runs two) can start a server on it.
  const port = 1;
  // No wait at disconnect (default 2 s): between reconnects the socket is already closed, so ioredis'
  // disconnect() would hold a timer for a `close` that already came, keeping the Jest worker alive.
  const redis = new Redis(`redis://127.0.0.1:${port}`, { disconnectTimeout: 0 });
  const printed: string[] = [];
  const spies = (['error', 'warn', 'log'] as const).map((level) =>
    jest.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      printed.push(args.map(String).join(' '));
    }),
  );
  try {
    return await body({ redis, port, printed });
  } finally {
    for (const spy of spies) spy.mockRestore();
    redis.disconnect();
  }
}
