import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { freePort, isListening, waitFor } from './net';

/**
 * A private `redis-server` on 127.0.0.1 that a suite starts, stops and starts again on the same port, for
 * outage tests (Redis stopped mid-run) and cluster tests. Keeps nothing on disk.
 */
export class RedisServer {
  #child: ChildProcess | undefined;
  readonly #dir = mkdtempSync(join(tmpdir(), 'ic-redis-'));

  private constructor(
    readonly port: number,
    private readonly extraArgs: string[],
  ) {}

  /** Starts a server on a free port (or `port`), resolving once it accepts connections. */
  static async start(options: { port?: number; args?: string[] } = {}): Promise<RedisServer> {
    const server = new RedisServer(options.port ?? (await freePort()), options.args ?? []);
    await server.restart();
    return server;
  }

  /** `redis://127.0.0.1:<port>` */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts the server again on the same port (after {@link RedisServer.stop}). */
  async restart(): Promise<void> {
    if (this.#child) return;
    const args = [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      this.#dir,
    ];
    const child = spawn('redis-server', [...args, ...this.extraArgs], { stdio: 'ignore' });
    this.#child = child;
    child.once('exit', () => {
      if (this.#child === child) this.#child = undefined;
    });
    await waitFor(`redis-server on port ${this.port}`, () => isListening(this.port), 10_000);
  }

  /** Kills the server (SIGKILL: an abrupt outage) and waits until the port is closed. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#child = undefined;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    await waitFor(`port ${this.port} to close`, async () => !(await isListening(this.port)), 10_000);
  }

  /**
   * Freezes the server (SIGSTOP): the kernel still accepts TCP connections for it, but nothing is answered,
   * not even a new client's ready check, until {@link RedisServer.resume}.
   */
  freeze(): void {
    this.#child?.kill('SIGSTOP');
  }

  /** Lets a frozen server run again (SIGCONT). */
  resume(): void {
    this.#child?.kill('SIGCONT');
  }

  /**
   * Runs `use` with a runner whose store's client is still connecting: the server is frozen
   * ({@link RedisServer.freeze}), so the client's TCP connection is accepted (status `connect`) and its
   * ready check is never answered; a consumer's `start()` then waits in its store check. The store's
   * `commandTimeoutMs` is 500. Afterwards the server runs again and the client is disconnected.
   */
  async withStoreStillConnecting(use: (idempotency: Idempotency) => Promise<void>): Promise<void> {
    this.freeze();
    const connecting = new Redis(this.url, { maxRetriesPerRequest: 0, disconnectTimeout: 0 });
    try {
      await once(connecting, 'connect');
      // Connected, not ready: start()'s store check waits for it.
      if (connecting.status !== 'connect') throw new Error(`the client is ${connecting.status}, not connect`);
      const store = new RedisIdempotencyStore({ redis: connecting }, { commandTimeoutMs: 500 });
      await use(new Idempotency({ store }, {}));
    } finally {
      this.resume();
      const ended = once(connecting, 'end');
      connecting.disconnect();
      await ended;
    }
  }

  /** Stops the server and removes its directory. */
  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

/** What {@link usePrivateRedis} gives a suite; read its fields inside tests (they are set in `beforeAll`). */
export interface PrivateRedis {
  /** The suite's own server, to stop and restart. */
  readonly server: RedisServer;
  /** The client under test: one try per command, reconnecting every 50 ms. */
  readonly redis: Redis;
  /** A second client for admin commands (CLIENT PAUSE) that retries until the server answers. */
  readonly admin: Redis;
}

/**
 * Starts a private redis-server for the calling `describe` (in `beforeAll`) with its two clients, and
 * disposes of them in `afterAll`: outage suites stop, pause or kill it without disturbing other suites.
 */
export function usePrivateRedis(): PrivateRedis {
  const handle = {} as { server: RedisServer; redis: Redis; admin: Redis };
  beforeAll(async () => {
    handle.server = await RedisServer.start();
    handle.redis = new Redis(handle.server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    handle.admin = new Redis(handle.server.url, { retryStrategy: () => 50 });
    // Connected before the first test: on a loaded machine a first command could outlast a test's short
    // commandTimeoutMs while the client still connects.
    await Promise.all([handle.redis.ping(), handle.admin.ping()]);
  });
  afterAll(async () => {
    handle.redis?.disconnect();
    handle.admin?.disconnect();
    await handle.server?.dispose();
  });
  return handle;
}

/** What {@link useFailFastRedis} gives a suite; read its fields inside tests (they are set in hooks). */
export interface FailFastRedis {
  /** The suite's own server, to stop and restart. */
  readonly server: RedisServer;
  /** This test's client: no offline queue and no retry, so commands fail at once while the server is down. */
  readonly redis: Redis;
}

/**
 * Starts a private redis-server for the calling `describe` (in `beforeAll`, with `args` added to its
 * command line), and before each test a client of it that fails fast while it is down (no offline queue,
 * in-flight commands rejected at once, reconnecting every 100 ms), disconnected after the test. Call it
 * after the suite's own fixture hooks, so the client is disconnected after the fixture's cleanup.
 */
export function useFailFastRedis(args: string[] = []): FailFastRedis {
  const handle = {} as { server: RedisServer; redis: Redis };
  beforeAll(async () => {
    handle.server = await RedisServer.start({ args });
  });
  afterAll(() => handle.server?.dispose());
  beforeEach(async () => {
    handle.redis = new Redis(handle.server.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 100,
    });
    await waitFor('the store client', () => handle.redis.status === 'ready');
  });
  afterEach(() => handle.redis.disconnect());
  return handle;
}
