import { InvalidOptionError } from '../errors';

/**
 * `RedisIdempotencyStore`'s default `maxCommandsPerWrite`. At 50 in flight, 4 to 16 gave the same throughput
 * here and 2 about 20% less.
 */
export const DEFAULT_MAX_COMMANDS_PER_WRITE = 8;

/**
 * Returns `value` when it is a valid `maxCommandsPerWrite`, an integer ≥ 1.
 * @throws {@link InvalidOptionError} otherwise.
 */
export function checkMaxCommandsPerWrite(value: number): number {
  if (!(Number.isSafeInteger(value) && value >= 1)) {
    throw new InvalidOptionError(`maxCommandsPerWrite must be an integer >= 1, got ${value}`);
  }
  return value;
}

/** The part of a socket the coalescer uses, Node's `Writable.cork` and `uncork`. */
export interface CorkableStream {
  cork(): void;
  uncork(): void;
}

/**
 * Coalesces the commands one store sends on one connection into fewer socket writes. The socket is corked
 * before the first command and uncorked after `maxCommandsPerWrite` commands or at `process.nextTick`,
 * whichever comes first, and all buffered commands then leave in one `writev`. A store sends from promise
 * reactions, when a reply arrived or a handler returned. A `nextTick` callback queued there runs once the
 * microtasks queued with it have run, so the commands of one burst of replies share writes. Nothing waits for
 * a timer. A command is at most one tick late, and its order on the connection is unchanged.
 *
 * At tens of commands in flight, each `write` to an idle Redis costs a system call and wakes the server once
 * per command, which on a small or virtual machine is most of the client's CPU per message. Flushing after a
 * few commands rather than only at the end of the tick keeps Redis busy while Node prepares the rest.
 * Uncorking only at the end of the tick left Redis idle, at 50,000 against 56,000 calls/s.
 *
 * Several coalescers of several stores on one connection nest. Node flushes a socket when its last cork is
 * undone, so their commands leave together, still within the tick.
 */
export class WriteCoalescer {
  #corked: CorkableStream | undefined;
  #commands = 0;
  #flushScheduled = false;
  readonly #flushAtTickEnd = () => {
    this.#flushScheduled = false;
    this.#flush();
  };

  /**
   * @param maxCommandsPerWrite - commands buffered before they are written, an integer ≥ 1. With 1 each
   *   command is written at once, and a store then does better without a coalescer.
   * @throws {@link InvalidOptionError} when it is not an integer ≥ 1.
   */
  constructor(private readonly maxCommandsPerWrite: number) {
    checkMaxCommandsPerWrite(maxCommandsPerWrite);
  }

  /**
   * Runs `send`, which writes one command to `stream` synchronously as an ioredis call does, with `stream`
   * corked, and returns what it returns. An undefined `stream`, from a client not connected yet, sends as is.
   * @throws what `send` throws. The socket is still uncorked by the end of the tick.
   */
  send<T>(stream: CorkableStream | undefined, send: () => T): T {
    if (stream === undefined) return send();
    if (stream !== this.#corked) {
      // After a reconnect the client writes to a new socket, so the old one's buffered commands leave now.
      this.#flush();
      stream.cork();
      this.#corked = stream;
    }
    try {
      return send();
    } finally {
      if (++this.#commands >= this.maxCommandsPerWrite) {
        this.#flush();
      } else if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        process.nextTick(this.#flushAtTickEnd);
      }
    }
  }

  /** Commands buffered and not yet written, for tests. */
  get buffered(): number {
    return this.#commands;
  }

  #flush(): void {
    const stream = this.#corked;
    this.#corked = undefined;
    this.#commands = 0;
    stream?.uncork();
  }
}
