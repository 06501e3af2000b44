import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import type { FenceWorkerConfig, FenceWorkerMessage } from '../../workers/core-fence-worker';

const WORKER = join(__dirname, '..', '..', 'workers', 'core-fence-worker.ts');

/** A holder process and the messages it sends, awaited by type. */
class Holder {
  readonly #child: ChildProcess;
  readonly #waiting = new Map<string, (m: FenceWorkerMessage) => void>();
  readonly #seen = new Map<string, FenceWorkerMessage>();

  constructor(config: FenceWorkerConfig) {
    this.#child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
      env: { ...process.env, FENCE_WORKER_CONFIG: JSON.stringify(config) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.#child.on('message', (m: FenceWorkerMessage) => {
      this.#seen.set(m.type, m);
      this.#waiting.get(m.type)?.(m);
    });
  }

  next<T extends FenceWorkerMessage['type']>(type: T): Promise<Extract<FenceWorkerMessage, { type: T }>> {
    const seen = this.#seen.get(type);
    if (seen) return Promise.resolve(seen as Extract<FenceWorkerMessage, { type: T }>);
    return new Promise((resolve, reject) => {
      this.#waiting.set(type, resolve as (m: FenceWorkerMessage) => void);
      this.#waiting.set('error', (m) => reject(new Error((m as { message: string }).message)));
      this.#child.once('exit', (code) => reject(new Error(`holder exited with ${code} before '${type}'`)));
    });
  }

  finish(): void {
    this.#child.send({ type: 'finish' });
  }

  kill(): void {
    if (this.#child.exitCode === null) this.#child.kill('SIGKILL');
  }
}

// Issue: a record lost while its holder works (Redis killed and restarted empty) must not let a second
// holder's token equal the first one's. Two processes, a private redis-server killed with SIGKILL.
describeWithServices(['redis'], 'a lost record: kill -9 and an empty restart of Redis', () => {
  let server: RedisServer;
  let redis: Redis;
  const holders: Holder[] = [];
  beforeAll(async () => {
    server = await RedisServer.start();
    redis = new Redis(server.url, { retryStrategy: () => 50 });
  });
  afterAll(async () => {
    for (const h of holders) h.kill();
    redis.disconnect();
    await server.dispose();
  });

  it('the old holder is refused; never both recorded; the new token is greater', async () => {
    const prefix = `lost-${Date.now().toString(36)}`;
    const config = { url: server.url, prefix, key: 'payment-1' };
    const a = new Holder({ ...config, name: 'A' });
    holders.push(a);
    const runningA = await a.next('running');

    await server.stop(); // kill -9: the record and everything else is gone
    await server.restart(); // empty: no persistence

    const b = new Holder({ ...config, name: 'B' });
    holders.push(b);
    const runningB = await b.next('running');
    expect(runningB.fencingToken).toBeGreaterThan(runningA.fencingToken);
    expect(runningB.attempt).toBe(1); // the attempt count restarts with the record (documented)

    a.finish();
    const doneA = await a.next('done');
    b.finish();
    const doneB = await b.next('done');

    expect(doneA).toMatchObject({ status: 'lease-lost', fencingToken: runningA.fencingToken });
    expect(doneB).toMatchObject({ status: 'completed', recorded: true, fencingToken: runningB.fencingToken });
    const store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
    const id = { scope: 'fence', key: 'payment-1' };
    expect(await store.get(id)).toMatchObject({
      state: 'COMPLETED',
      fencingToken: runningB.fencingToken,
      result: 'j"B"',
    });
    // Every fenced write of the old holder is refused, whatever it tries.
    for (const write of [
      () => store.complete(id, runningA.fencingToken, { retentionMs: 60_000, result: 'j"A"' }),
      () => store.release(id, runningA.fencingToken, { retentionMs: 60_000 }),
      () => store.fail(id, runningA.fencingToken, { retentionMs: 60_000, error: 'x' }),
      () => store.extend(id, runningA.fencingToken, { leaseMs: 1_000, retentionMs: 60_000 }),
    ]) {
      expect(await write()).toMatchObject({ ok: false, reason: 'LEASE_LOST' });
    }
  }, 60_000);
});
