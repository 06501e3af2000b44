import type { RecordState } from '@idempotent-consumer/core';
import { confirm } from '../confirm';
import { EXIT } from '../io';
import { table } from '../output';
import type { CommandContext } from './context';
import { countScope } from './stats';

/**
 * `purge SCOPE [--state …]` deletes the records of a scope, optionally only those in some states. It runs one
 * Lua script per key, lua/admin-purge.lua through `RedisIdempotencyAdmin.purge`. It never sends a blind DEL
 * and never deletes a record whose lease a worker holds. It counts first and asks. Records written while it
 * runs may or may not be deleted. When Redis fails part-way, because a purge was refused or timed out or a
 * node was lost mid-scan, it stops. It still prints what it deleted and how many purges failed, which are not
 * known to be deleted, and then fails with the error, exit status 1.
 */
export async function purge(
  ctx: CommandContext,
  scope: string,
  options: { states: readonly RecordState[] },
): Promise<number> {
  const counted = await countScope(ctx, scope);
  const wanted = options.states.length > 0 ? options.states : (Object.keys(counted.states) as RecordState[]);
  const candidates = wanted.reduce((n, s) => n + counted.states[s], 0);
  if (candidates === 0) {
    ctx.out.result(
      { scope, deleted: 0, skipped: {} },
      () => `No records to purge in scope ${JSON.stringify(scope)}`,
    );
    return EXIT.ok;
  }
  await confirm(
    ctx.io,
    `Delete ${candidates} record(s) (${wanted.join(', ')}) of scope ${JSON.stringify(scope)}? Records whose lease a worker holds are kept. Their keys' next messages run the handler again.`,
    ctx.yes,
  );
  let deleted = 0;
  let failed = 0;
  let error: unknown;
  const skipped: Record<string, number> = {};
  try {
    for await (const ids of ctx.admin.scan(scope)) {
      // allSettled, not all, because the purges of a batch that did succeed are deletions to report.
      const replies = await Promise.allSettled(
        ids.map((id) => ctx.admin.purge(id, { states: options.states })),
      );
      for (const reply of replies) {
        if (reply.status === 'rejected') {
          failed++;
          error ??= reply.reason;
        } else if (reply.value.outcome === 'DELETED') deleted++;
        else skipped[reply.value.outcome] = (skipped[reply.value.outcome] ?? 0) + 1;
      }
      // No further deletions on a Redis that is failing. The operator sees the count and runs it again.
      if (error !== undefined) break;
    }
  } catch (scanError) {
    error = scanError; // the SCAN failed, and the deletions before it still happened
  }
  if (deleted > 0) ctx.changed();
  const result =
    error === undefined
      ? { scope, deleted, skipped }
      : { scope, deleted, skipped, failed, error: error instanceof Error ? error.message : String(error) };
  ctx.out.result(result, () => {
    const rows: (string | number)[][] = [['deleted', deleted]];
    for (const [why, n] of Object.entries(skipped)) rows.push([`kept: ${why}`, n]);
    if (error !== undefined) rows.push(['failed (not known to be deleted)', failed]);
    const stopped =
      error === undefined ? '' : '\nStopped by a Redis failure: the rest of the scope was not purged';
    return `${table(['records', 'count'], rows)}${stopped}`;
  });
  // The caller prints the error and exits with status 1, see program.ts.
  if (error !== undefined) throw error;
  return EXIT.ok;
}
