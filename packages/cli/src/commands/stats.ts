import type { RecordState } from '@idempotent-consumer/core';
import { EXIT } from '../io';
import { table } from '../output';
import type { CommandContext } from './context';
import { scanRecords } from './scan-records';

/** Counts per state of one scope, and how many of the IN_PROGRESS ones have a lapsed lease. */
export interface ScopeStats {
  readonly scope: string;
  readonly total: number;
  readonly states: Record<RecordState, number>;
  /** IN_PROGRESS records whose lease has lapsed on the server clock. The next claim takes them over. */
  readonly inProgressLapsed: number;
}

/** `stats SCOPE` counts the records per state with SCAN, never KEYS. */
export async function stats(ctx: CommandContext, scope: string): Promise<number> {
  const result = await countScope(ctx, scope);
  ctx.out.result(result, () =>
    table(
      ['state', 'records'],
      [
        ...Object.entries(result.states).flatMap(([state, n]) =>
          // The lapsed leases are part of the IN_PROGRESS count, under it, so that the rows above add up.
          state === 'IN_PROGRESS'
            ? [
                [state, n],
                ['  of which lease lapsed', result.inProgressLapsed],
              ]
            : [[state, n]],
        ),
        ['total', result.total],
      ],
    ),
  );
  return EXIT.ok;
}

/** Counts the records of a scope per state. */
export async function countScope(ctx: CommandContext, scope: string): Promise<ScopeStats> {
  const serverTimeMs = await ctx.admin.serverTimeMs();
  const states: Record<RecordState, number> = { IN_PROGRESS: 0, COMPLETED: 0, RELEASED: 0, FAILED: 0 };
  let total = 0;
  let inProgressLapsed = 0;
  for await (const { record } of scanRecords(ctx.admin, scope)) {
    total++;
    states[record.state]++;
    if (record.state === 'IN_PROGRESS' && (record.leaseExpiresAtMs ?? 0) <= serverTimeMs) inProgressLapsed++;
  }
  return { scope, total, states, inProgressLapsed };
}
