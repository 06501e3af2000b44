import type { RecordState } from '@idempotent-consumer/core';
import { EXIT } from '../io';
import { table } from '../output';
import { flagsOf, type RecordView, recordView } from '../record-view';
import type { CommandContext } from './context';
import { scanRecords } from './scan-records';

/**
 * `list SCOPE [--state …] [--limit N]` shows the records of a scope found by SCAN, optionally only in some
 * states, at most `limit` of them, in the order SCAN finds them. Each has the markers `inspect` shows, the
 * `RECORD_FLAGS` of record-view.ts, in one `flags` column of the table and as their fields in `--json`.
 */
export async function list(
  ctx: CommandContext,
  scope: string,
  options: { states: readonly RecordState[]; limit: number; previewChars: number },
): Promise<number> {
  const serverTimeMs = await ctx.admin.serverTimeMs();
  const views: RecordView[] = [];
  let truncated = false;
  for await (const { id, record } of scanRecords(ctx.admin, scope)) {
    if (options.states.length > 0 && !options.states.includes(record.state)) continue;
    if (views.length === options.limit) {
      truncated = true;
      break;
    }
    views.push(recordView(id, record, serverTimeMs, options.previewChars));
  }
  ctx.out.result({ scope, records: views, truncated }, () => {
    const rows = views.map((v) => [
      v.key,
      v.state,
      flagsOf(v).join(', '),
      v.fencingToken,
      v.attempt,
      v.leaseRemainingMs === null ? '' : v.leaseRemainingMs,
      v.updatedAt,
    ]);
    const more = truncated ? `\n(first ${options.limit}; raise --limit to see more)` : '';
    return `${table(['key', 'state', 'flags', 'token', 'attempt', 'lease left (ms)', 'updated'], rows)}${more}`;
  });
  return EXIT.ok;
}
