import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { freshKey, post } from './client';
import { FRAMEWORKS } from './servers';

const ROOT = join(__dirname, '..', '..', '..');
const WORKER = join(ROOT, 'integration-tests', 'workers', 'http-server-worker.ts');
/** The killed server's lease: long enough for the next server to start and see the key in progress. */
const LEASE_MS = 4_000;

/** A server process and the events it printed. */
class ServerProcess {
  readonly events: Record<string, unknown>[] = [];
  readonly exited: Promise<NodeJS.Signals | number | null>;

  constructor(readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        this.events.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // Not one of ours.
      }
    });
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  }

  /** Waits until the process printed `event` (a long deadline: tsx compiles on start); its fields. */
  async until(event: string): Promise<Record<string, unknown>> {
    await waitFor(`the server to print ${event}`, () => this.events.some((e) => e.event === event), 60_000);
    return this.events.find((e) => e.event === event)!;
  }
}

describeWithServices(['redis'], 'HTTP Idempotency-Key: a server killed with SIGKILL mid-request', (urls) => {
  const processes: ServerProcess[] = [];
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(urls.redis);
  });
  afterEach(async () => {
    for (const p of processes.splice(0)) {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  });
  afterAll(() => redis.quit());

  describe.each(FRAMEWORKS)('%s', (framework, start) => {
    it("the key stays in progress (409 with Retry-After) until the killed server's lease lapses, then one retry runs it again (ACQUIRED_STALE) and later ones get that answer replayed", async () => {
      const keyPrefix = `http-kill-${randomUUID()}`;
      const key = freshKey();
      const killed = new ServerProcess(
        spawn(process.execPath, ['--import', 'tsx', WORKER], {
          cwd: ROOT,
          stdio: ['ignore', 'pipe', 'inherit'],
          env: {
            ...process.env,
            FRAMEWORK: framework,
            REDIS_URL: urls.redis,
            KEY_PREFIX: keyPrefix,
            LEASE_MS: String(LEASE_MS),
            HOLD_KEY: key,
            // The test servers' NestJS controllers use decorators, which this tsconfig turns on.
            TSX_TSCONFIG_PATH: join(ROOT, 'integration-tests', 'tsconfig.json'),
          },
        }),
      );
      processes.push(killed);
      const { url } = (await killed.until('ready')) as { url: string };
      const body = { amount: 42 };
      const cut = post(url, '/orders', { key, body }).then(
        () => 'answered',
        () => 'cut off',
      );
      await killed.until('entered');
      killed.child.kill('SIGKILL');
      expect(await killed.exited).toBe('SIGKILL');
      expect(await cut).toBe('cut off');

      const store = new RedisIdempotencyStore({ redis }, { keyPrefix });
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 10_000 });
      const impatient = await start(idempotency, { conflictWaitMs: 0 });
      const patient = await start(idempotency, { conflictWaitMs: 30_000 });
      try {
        const busy = await post(impatient.url, '/orders', { key, body });
        expect(busy.status).toBe(409);
        expect(busy.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:request-in-progress' });
        expect(Number(busy.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(Number(busy.headers.get('retry-after'))).toBeLessThanOrEqual(LEASE_MS / 1000);

        // Waits for the killed server's lease to lapse, then claims the key itself.
        const rerun = await post(patient.url, '/orders', { key, body });
        expect(rerun.status).toBe(201);
        expect(rerun.headers.get('idempotent-replayed')).toBeNull();
        expect(rerun.json).toMatchObject({ outcome: 'ACQUIRED_STALE', attempt: 2 });
        const replayed = await post(impatient.url, '/orders', { key, body });
        expect(replayed.headers.get('idempotent-replayed')).toBe('true');
        expect(replayed.bytes.equals(rerun.bytes)).toBe(true);
        expect((impatient.calls.get('orders') ?? 0) + (patient.calls.get('orders') ?? 0)).toBe(1);
      } finally {
        await Promise.all([impatient.close(), patient.close()]);
        store.close();
      }
    });
  });
});
