import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describeWithServices } from '../../support/service';

const run = promisify(execFile);
const cli = join(__dirname, '..', '..', '..', 'demo', 'dist', 'cli.js');

jest.setTimeout(300_000);

describeWithServices(
  ['redis', 'rabbitmq', 'postgres'],
  'demo --side-effect postgres',
  ({ redis, rabbitmq, postgres }) => {
    it('0 double charges with the SDK, even for the consumer killed after its commit; the baseline double-charges it', async () => {
      if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (npm test does)`);
      const { stdout, stderr } = await run(
        process.execPath,
        [
          cli,
          '--side-effect',
          'postgres',
          '--payments',
          '300',
          '--consumers',
          '2',
          '--database-url',
          postgres,
        ],
        {
          env: { ...process.env, REDIS_URL: redis, AMQP_URL: rabbitmq },
          timeout: 280_000,
          maxBuffer: 16 * 1024 * 1024,
        },
      );
      const cells = (label: string) =>
        stdout
          .match(new RegExp(`│\\s*${label.replace(/[()]/g, '\\$&')}\\s*│\\s*(\\d+)\\s*│\\s*(\\d+)`))
          ?.slice(1)
          .map(Number);
      // The progress log (stderr) says where the SDK run's consumer died.
      expect(stderr).toMatch(
        /sdk: SIGKILL to a consumer mid-handler \(.*\), after its charge committed and before COMPLETED/,
      );
      expect(cells('killed mid-handler (SIGKILL)')).toEqual([1, 1]);
      expect(cells('charged')?.[0]).toBe(300);
      expect(cells('extra charges (double charges)')?.[0]).toBe(0);
      expect(cells('never charged (lost)')).toEqual([0, 0]);
      // Without the SDK the injected duplicates and the killed consumer's payment are charged again.
      expect(cells('extra charges (double charges)')?.[1]).toBeGreaterThan(0);
      expect(stdout).toContain('With idempotent-consumer: 300 charges for 300 payments, none lost.');
    });
  },
);
