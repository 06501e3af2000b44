import type { RecordState } from '@idempotent-consumer/core';
import { confirm } from '../confirm';
import { EXIT } from '../io';
import { table } from '../output';
import type { CommandContext } from './context';
import { countScope } from './stats';

/**
 * `purge SCOPE [--state …]`: deletes the records of a scope (optionally only those in some states), one
 * Lua script per key (lua/admin-purge.lua through `RedisIdempotencyAdmin.purge`), never a blind DEL and
 * never a record whose lease a worker holds. Counts first and asks. Records written while it runs may or
 * may not be deleted.
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
  const skipped: Record<string, number> = {};
  for await (const ids of ctx.admin.scan(scope)) {
    const replies = await Promise.all(ids.map((id) => ctx.admin.purge(id, { states: options.states })));
    for (const reply of replies) {
      if (reply.outcome === 'DELETED') deleted++;
      else skipped[reply.outcome] = (skipped[reply.outcome] ?? 0) + 1;
    }
  }
  ctx.out.result({ scope, deleted, skipped }, () => {
    const rows: (string | number)[][] = [['deleted', deleted]];
    for (const [why, n] of Object.entries(skipped)) rows.push([`kept: ${why}`, n]);
    return table(['records', 'count'], rows);
  });
  return EXIT.ok;
}
