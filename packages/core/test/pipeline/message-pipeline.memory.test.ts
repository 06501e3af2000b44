import { MemoryIdempotencyStore } from '../../src';
import { ROWS, runRow } from './pipeline-table';

describe('MessagePipeline on the memory store', () => {
  it.each(ROWS.map((row) => [row.name, row] as const))('%s', async (_name, row) => {
    await runRow(row, () => new MemoryIdempotencyStore());
  });
});
