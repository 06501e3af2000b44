import { Idempotency, NonRetryableError, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { Cluster } from 'ioredis';
import { waitFor } from '../../support/net';
import { describeWithRedisCluster, RedisCluster } from '../../support/redis-cluster';
import { uniquePrefix } from '../core/redis-target';
import { cli } from './run-cli';

// The CLI against a real Redis Cluster this suite starts (3 masters + 3 replicas): it finds out by itself
// that the URL is a Cluster node, SCANs every master, and runs each admin script on the key's node.
describeWithRedisCluster('idempotent-consumer CLI on a local Redis Cluster', () => {
  let cluster: RedisCluster;
  let redis: Cluster;
  let url: string;
  const prefix = uniquePrefix('cli-cluster');
  const scope = 'payments';
  const run = (args: string[]) => cli(url, ['--prefix', prefix, '--json', ...args]);

  beforeAll(async () => {
    cluster = await RedisCluster.start();
    url = `redis://127.0.0.1:${cluster.ports[0]}`;
    redis = new Cluster(cluster.nodes, { clusterRetryStrategy: () => 100 });
    await waitFor('ioredis Cluster ready', () => redis.status === 'ready', 10_000);
    const idempotency = new Idempotency({
      store: new RedisIdempotencyStore({ redis }, { keyPrefix: prefix }),
    });
    await Promise.all(
      Array.from({ length: 60 }, (_, i) => idempotency.run({ scope, key: `k-${i}` }, () => i)),
    );
    await idempotency.run({ scope, key: 'declined' }, () => {
      throw new NonRetryableError('declined');
    });
  }, 90_000);

  afterAll(async () => {
    await redis?.quit().catch(() => undefined);
    await cluster?.stop();
  });

  it('stats SCANs every master: the records live on all three', async () => {
    const masters = redis.nodes('master');
    const perNode = await Promise.all(masters.map((n) => n.dbsize()));
    expect(perNode.filter((n) => n > 0)).toHaveLength(3);
    const stats = await run(['stats', scope]);
    expect(stats.status).toBe(0);
    expect(stats.json()).toMatchObject({ total: 61, states: { COMPLETED: 60, FAILED: 1 } });
  });

  it('--no-cluster on a Cluster node is refused (exit 2): one node holds a third of the records', async () => {
    for (const args of [
      ['stats', scope],
      ['--yes', 'purge', scope],
    ]) {
      const refused = await cli(url, ['--prefix', prefix, '--no-cluster', ...args]);
      expect(refused.status).toBe(2);
      expect(refused.stderr).toMatch(/Cluster node/);
    }
    // Nothing was purged: every record is still there.
    expect((await run(['stats', scope])).json()).toMatchObject({ total: 61 });
  });

  it('--cluster is taken at its word: an account refused INFO still reads the Cluster', async () => {
    await Promise.all(
      redis
        .nodes('all')
        .map((node) => node.call('ACL', 'SETUSER', 'no-info', 'on', '>pw', '+@all', '-info', '~*')),
    );
    const noInfo = `redis://no-info:pw@127.0.0.1:${cluster.ports[0]}`;
    const told = await cli(noInfo, ['--prefix', prefix, '--json', '--cluster', 'stats', scope]);
    expect(told.stderr).toBe('');
    expect(told.status).toBe(0);
    expect(told.json()).toMatchObject({ total: 61 });
  });

  it('inspect, release and purge run on the node that owns the key', async () => {
    const inspected = await run(['inspect', scope, 'k-7']);
    expect(inspected.json()).toMatchObject({ found: true, state: 'COMPLETED', resultPreview: '7' });
    const released = await run(['--yes', 'release', scope, 'declined']);
    expect(released.json()).toMatchObject({ outcome: 'OK', previousState: 'FAILED' });
    expect((await run(['inspect', scope, 'declined'])).json()).toMatchObject({
      state: 'RELEASED',
      attempt: 0,
    });
    const purged = await run(['--yes', 'purge', scope]);
    expect(purged.json()).toEqual({ scope, deleted: 61, skipped: {} });
    expect((await run(['stats', scope])).json()).toMatchObject({ total: 0 });
  });
});
