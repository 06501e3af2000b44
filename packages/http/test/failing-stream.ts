import { Readable } from 'node:stream';

/**
 * A body stream of `chunks` chunks of 1 KiB of `x` that then fails with `error` (on the read after the
 * last chunk), for the tests of bodies past `maxResponseBytes` (unit and integration). `error`
 * `undefined`: it is destroyed without an error (a `close` with no `end` and no `error`).
 */
export function failingStream(error: Error | undefined, chunks = 8): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent === chunks) return void this.destroy(error);
      sent += 1;
      this.push(Buffer.alloc(1024, 'x'));
    },
  });
}
