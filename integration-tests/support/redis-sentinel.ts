import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { freePort, isListening, waitFor } from './net';
import { RedisServer } from './redis-server';

/**
 * A Redis primary, one replica (`--replicaof`) and `sentinels` Redis Sentinels (Debian's `redis-sentinel`)
 * monitoring them under {@link SentinelGroup.masterName}, all on free loopback ports, started by a suite and
 * stopped by {@link SentinelGroup.stop}. Quorum 2; `down-after-milliseconds` 1000.
 */
export class SentinelGroup {
  readonly masterName = 'ic-primary';
  readonly #sentinels: ChildProcess[] = [];

  private constructor(
    readonly primary: RedisServer,
    readonly replica: RedisServer,
    /** The sentinels' ports. */
    readonly sentinelPorts: number[],
    private readonly dir: string,
  ) {}

  /** Starts everything and resolves once each sentinel sees the replica and the other sentinels. */
  static async start(options: { sentinels?: number } = {}): Promise<SentinelGroup> {
    const primary = await RedisServer.start();
    const replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
    const ports: number[] = [];
    while (ports.length < (options.sentinels ?? 3)) {
      const port = await freePort();
      if (!ports.includes(port)) ports.push(port);
    }
    const group = new SentinelGroup(primary, replica, ports, mkdtempSync(join(tmpdir(), 'ic-sentinel-')));
    try {
      await group.#startSentinels();
    } catch (error) {
      await group.stop();
      throw error;
    }
    return group;
  }

  /** Startup nodes for ioredis' Sentinel support: `new Redis({ sentinels, name: masterName })`. */
  get sentinels(): { host: string; port: number }[] {
    return this.sentinelPorts.map((port) => ({ host: '127.0.0.1', port }));
  }

  /** Sends one command to the first sentinel. */
  async sentinel(...args: (string | number)[]): Promise<unknown> {
    const client = new Redis({ host: '127.0.0.1', port: this.sentinelPorts[0]!, lazyConnect: true });
    try {
      await client.connect();
      return await client.call('SENTINEL', ...args);
    } finally {
      client.disconnect();
    }
  }

  /** The port of the current primary, as the sentinels report it. */
  async primaryPort(): Promise<number> {
    const [, port] = (await this.sentinel('get-master-addr-by-name', this.masterName)) as [string, string];
    return Number(port);
  }

  async #startSentinels(): Promise<void> {
    for (const port of this.sentinelPorts) {
      const file = join(this.dir, `sentinel-${port}.conf`);
      writeFileSync(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${this.dir}`,
          `sentinel monitor ${this.masterName} 127.0.0.1 ${this.primary.port} 2`,
          `sentinel down-after-milliseconds ${this.masterName} 1000`,
          `sentinel failover-timeout ${this.masterName} 10000`,
          `sentinel parallel-syncs ${this.masterName} 1`,
          '',
        ].join('\n'),
      );
      this.#sentinels.push(spawn('redis-sentinel', [file], { stdio: 'ignore' }));
      await waitFor(`redis-sentinel on port ${port}`, () => isListening(port), 10_000);
    }
    for (const port of this.sentinelPorts) {
      const client = new Redis({ host: '127.0.0.1', port });
      try {
        await waitFor(
          `sentinel ${port} to see the replica and ${this.sentinelPorts.length - 1} other sentinels`,
          async () => {
            const replicas = (await client.call('SENTINEL', 'replicas', this.masterName)) as unknown[];
            const others = (await client.call('SENTINEL', 'sentinels', this.masterName)) as unknown[];
            return replicas.length === 1 && others.length === this.sentinelPorts.length - 1;
          },
          30_000,
          100,
        );
      } finally {
        client.disconnect();
      }
    }
  }

  /** Kills the sentinels, the replica and the primary, and removes the sentinels' directory. */
  async stop(): Promise<void> {
    await Promise.all(
      this.#sentinels.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGKILL');
          }),
      ),
    );
    await this.replica.dispose();
    await this.primary.dispose();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
