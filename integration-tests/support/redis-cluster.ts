import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, isListening, waitFor } from './net';

const run = promisify(execFile);

/** Why a local Redis Cluster cannot be started here, or `undefined` when it can. */
export function redisClusterUnavailable(): string | undefined {
  for (const program of ['redis-server', 'redis-cli']) {
    try {
      execFileSync(program, ['--version'], { stdio: 'ignore' });
    } catch {
      return `no ${program} program to start a local Redis Cluster with`;
    }
  }
  return undefined;
}

/**
 * `describe` when a local Redis Cluster can be started (redis-server and redis-cli are installed),
 * otherwise `describe.skip` with the reason in the title, so the suite is reported skipped, never passed.
 */
export function describeWithRedisCluster(title: string, body: () => void): void {
  const why = redisClusterUnavailable();
  if (why) {
    process.stderr.write(`[integration] SKIPPED "${title}": ${why}\n`);
    describe.skip(`${title} [skipped: ${why}]`, body);
    return;
  }
  describe(title, body);
}

/**
 * A real Redis Cluster on 127.0.0.1: `masters` masters with one replica each (six `redis-server
 * --cluster-enabled yes` processes by default) in a temporary directory, joined by `redis-cli --cluster
 * create … --cluster-replicas 1`. Started on free ports, stopped and removed by {@link RedisCluster.stop}.
 */
export class RedisCluster {
  readonly #children = new Map<number, ChildProcess>();

  private constructor(
    /** Every node's port; masters first as created, replicas after. */
    readonly ports: number[],
    private readonly dir: string,
  ) {}

  /**
   * Starts the nodes, creates the cluster and resolves once every node reports `cluster_state:ok` and
   * sees all its peers, and every replica's link to its master is up.
   * @param options.masters - number of masters (3 by default); each gets one replica.
   * @param options.nodeTimeoutMs - `cluster-node-timeout` in ms (failure detection), 2000 by default.
   */
  static async start(options: { masters?: number; nodeTimeoutMs?: number } = {}): Promise<RedisCluster> {
    const masters = options.masters ?? 3;
    const ports: number[] = [];
    while (ports.length < masters * 2) {
      const port = await freePort();
      // The cluster bus listens on port + 10000; both must be free.
      if (port + 10_000 < 65_536 && !ports.includes(port) && !(await isListening(port + 10_000))) {
        ports.push(port);
      }
    }
    const cluster = new RedisCluster(ports, mkdtempSync(join(tmpdir(), 'ic-redis-cluster-')));
    try {
      for (const port of ports) cluster.#startNode(port, options.nodeTimeoutMs ?? 2000);
      await Promise.all(
        ports.map((port) => waitFor(`cluster node on ${port}`, () => isListening(port), 10_000)),
      );
      await run(
        'redis-cli',
        [
          '--cluster',
          'create',
          ...ports.map((p) => `127.0.0.1:${p}`),
          '--cluster-replicas',
          '1',
          '--cluster-yes',
        ],
        { timeout: 30_000 },
      );
      await waitFor(
        'cluster_state:ok on every node, every replica linked to its master',
        async () => {
          const infos = await Promise.all(ports.map((p) => cluster.cli(p, 'CLUSTER', 'INFO')));
          if (
            !infos.every(
              (i) => i.includes('cluster_state:ok') && i.includes(`cluster_known_nodes:${ports.length}`),
            )
          ) {
            return false;
          }
          const replication = await Promise.all(ports.map((p) => cluster.cli(p, 'INFO', 'replication')));
          return replication.every(
            (r) => r.includes('connected_slaves:1') || r.includes('master_link_status:up'),
          );
        },
        30_000,
        100,
      );
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  /** Startup nodes for ioredis `new Cluster(nodes)`. */
  get nodes(): { host: string; port: number }[] {
    return this.ports.map((port) => ({ host: '127.0.0.1', port }));
  }

  /** Runs one command on one node with redis-cli and returns its raw output. */
  async cli(port: number, ...args: string[]): Promise<string> {
    const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], {
      timeout: 10_000,
    });
    return stdout;
  }

  /** The node's role: `master` or `slave` (first line of `ROLE`). */
  async role(port: number): Promise<string> {
    return (await this.cli(port, 'ROLE')).split('\n')[0]!.trim();
  }

  /**
   * Freezes one node (SIGSTOP): it answers nothing, a replica acknowledges no write (its master's `WAIT`
   * times out), until {@link RedisCluster.resume}. Longer than `cluster-node-timeout`, the others mark it
   * failing.
   */
  freeze(port: number): void {
    this.#children.get(port)?.kill('SIGSTOP');
  }

  /** Lets a node frozen by {@link RedisCluster.freeze} run again (SIGCONT). */
  resume(port: number): void {
    this.#children.get(port)?.kill('SIGCONT');
  }

  /** Stops every node (SIGKILL) and removes the temporary directory. */
  async stop(): Promise<void> {
    const exits = [...this.#children.values()].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    );
    await Promise.all(exits);
    this.#children.clear();
    rmSync(this.dir, { recursive: true, force: true });
  }

  #startNode(port: number, nodeTimeoutMs: number): void {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(this.dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        String(nodeTimeoutMs),
        '--dir',
        this.dir,
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      { stdio: 'ignore' },
    );
    this.#children.set(port, child);
  }
}
