import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import { ROWS, runRow } from '../../../packages/core/test/pipeline/pipeline-table';
import { describeWithServices } from '../../support/service';
import { useRedisStore } from './redis-target';

// The pipeline's table (packages/core/test/pipeline/pipeline-table.ts) on real Redis: one prefix per row.
describeWithServices(['redis'], 'MessagePipeline on Redis', ({ redis: url }) => {
  const suite = useRedisStore(url, 'pipeline');
  let row = 0;
  it.each(ROWS.map((r) => [r.name, r] as const))('%s', async (_name, r) => {
    row += 1;
    const keyPrefix = `${suite.prefix}:${row}`;
    await runRow(r, () => new RedisIdempotencyStore({ redis: suite.redis }, { keyPrefix }));
  });
});
