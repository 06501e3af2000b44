import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Idempotency, NonRetryableError, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { deleteByPrefix, uniquePrefix } from '../core/redis-target';

/** How the bin process ended, and what it printed on stderr. */
interface Ended {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderr: string;
}

/**
 * Runs the bin (`src/bin.ts` through tsx) as a process whose stdout is a pipe that its reader closes
 * early: at once, before the command wrote anything (`'at once'`), or after the first chunk it read, as
 * `| head -1` does (`'after a chunk'`).
 */
function runWithStdoutClosed(args: string[], when: 'at once' | 'after a chunk'): Promise<Ended> {
  const bin = join(__dirname, '../../../packages/cli/src/bin.ts');
  const child = spawn(process.execPath, ['--import', 'tsx', bin, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (when === 'at once') child.stdout.destroy();
  else child.stdout.once('data', () => child.stdout.destroy());
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (status, signal) => resolve({ status, signal, stderr }));
  });
}

describeWithServices(
  ['redis'],
  'idempotent-consumer CLI writing to a pipe closed early',
  ({ redis: url }) => {
    const prefix = uniquePrefix('cli-pipe');
    let redis: Redis;
    let store: RedisIdempotencyStore;
    let idempotency: Idempotency;
    const cli = (...args: string[]) => ['--url', url, '--prefix', prefix, ...args];

    beforeAll(() => {
      redis = new Redis(url);
      store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
      idempotency = new Idempotency({ store }, { leaseMs: 600_000, maxAttempts: 3 });
    });

    afterAll(async () => {
      await deleteByPrefix(redis, prefix);
      await redis.quit();
    });

    it('list | head -1: stops quietly with exit status 0 (was an unhandled EPIPE error: a stack trace and exit status 1)', async () => {
      const scope = 'listed';
      await Promise.all(
        Array.from({ length: 1200 }, (_, i) => idempotency.run({ scope, key: `k-${i}` }, () => i)),
      );
      // About 400 bytes per record in JSON: far more than a pipe holds (64 KiB) plus the chunk read, so the
      // write meets the closed pipe.
      const ended = await runWithStdoutClosed(
        cli('--json', 'list', scope, '--limit', '1200'),
        'after a chunk',
      );
      expect(ended).toEqual({ status: 0, signal: null, stderr: '' });
    });

    it('purge --yes whose report meets a closed stdout: the records stay deleted, stderr says the report was cut, exit status 141 (was an unhandled EPIPE error: a stack trace and exit status 1)', async () => {
      const scope = 'purged';
      await Promise.all(
        Array.from({ length: 20 }, (_, i) => idempotency.run({ scope, key: `k-${i}` }, () => i)),
      );
      const ended = await runWithStdoutClosed(cli('--yes', 'purge', scope), 'at once');
      expect(ended.stderr).not.toMatch(/^\s+at /m);
      expect(ended.stderr).toMatch(
        /^idempotent-consumer: stdout closed before the purge report was written/m,
      );
      expect([ended.status, ended.signal]).toEqual([141, null]);
      const left = await Promise.all(
        Array.from({ length: 20 }, (_, i) => store.get({ scope, key: `k-${i}` })),
      );
      expect(left.filter((record) => record !== null)).toEqual([]);
    });

    it('release --yes whose report meets a closed stdout: the record stays released, exit status 141 (was an unhandled EPIPE error: a stack trace and exit status 1)', async () => {
      const id = { scope: 'released', key: 'declined' };
      await idempotency.run(id, () => {
        throw new NonRetryableError('card declined');
      });
      const ended = await runWithStdoutClosed(cli('--yes', 'release', id.scope, id.key), 'at once');
      expect(ended.stderr).not.toMatch(/^\s+at /m);
      expect(ended.stderr).toMatch(
        /^idempotent-consumer: stdout closed before the release report was written/m,
      );
      expect([ended.status, ended.signal]).toEqual([141, null]);
      expect(await store.get(id)).toMatchObject({ state: 'RELEASED' });
    });

    it('release or purge that changed nothing, whose report meets a closed stdout: its own status (3, 0), nothing said of changes (was 141 with "what it changed stays changed")', async () => {
      const released = await runWithStdoutClosed(
        cli('--yes', 'release', 'released', 'no-such-key'),
        'at once',
      );
      expect(released).toEqual({ status: 3, signal: null, stderr: '' });
      const purged = await runWithStdoutClosed(cli('--yes', 'purge', 'empty-scope'), 'at once');
      expect(purged).toEqual({ status: 0, signal: null, stderr: '' });
    });
  },
);
