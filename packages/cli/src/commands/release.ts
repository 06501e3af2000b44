import { confirm } from '../confirm';
import { EXIT } from '../io';
import { fieldTable } from '../output';
import { recordView } from '../record-view';
import type { CommandContext } from './context';
import { notARecordText, viewFields } from './inspect';
import { readRecord } from './scan-records';

/**
 * `release SCOPE KEY` makes a stuck IN_PROGRESS record, or a FAILED one, claimable again. It runs
 * lua/admin-release.lua through `RedisIdempotencyAdmin.release`. First it shows the record on stderr as
 * `inspect` does, with `--json` only when it asks, and asks unless `--yes`. The script gets the fencing token
 * and the state shown, so a record claimed or written meanwhile is left alone with `TOKEN_CHANGED`, exit
 * status 3. A key that holds another type than a hash, another program's, is neither shown nor changed:
 * `NOT_A_RECORD`, exit status 3. The report says whether a worker's lease was still held. In `--json` that is
 * `leaseHeld` and `leaseRemainingMs`, the lease left when it was read, `null` unless IN_PROGRESS.
 */
export async function release(
  ctx: CommandContext,
  scope: string,
  key: string,
  options: { retentionMs: number; previewChars: number },
): Promise<number> {
  const id = { scope, key };
  const [record, serverTimeMs] = await Promise.all([readRecord(ctx.admin, id), ctx.admin.serverTimeMs(id)]);
  // Another program's key, not a hash. Nothing to show or ask, and the script is never run on it.
  if (record === 'NOT_A_RECORD') {
    ctx.out.result(
      { scope, key, outcome: 'NOT_A_RECORD' },
      () => `Not released: key ${notARecordText(scope, key)}; nothing changed`,
    );
    return EXIT.nothingDone;
  }
  if (!record) {
    ctx.out.result(
      { scope, key, outcome: 'NOT_FOUND' },
      () => `No record for key ${JSON.stringify(key)} in scope ${JSON.stringify(scope)}`,
    );
    return EXIT.nothingDone;
  }
  if (record.state !== 'IN_PROGRESS' && record.state !== 'FAILED') {
    ctx.out.result(
      { scope, key, outcome: 'NOT_RELEASABLE', state: record.state },
      () => `The record is ${record.state}: only IN_PROGRESS and FAILED records are released`,
    );
    return EXIT.nothingDone;
  }
  const view = recordView(id, record, serverTimeMs, options.previewChars);
  // Shown on stderr to whoever is asked to confirm, with --json too, before the question. Without --json it
  // is also shown under --yes, as part of the report. --json --yes asks nothing and shows nothing.
  if (!ctx.out.json || !ctx.yes) ctx.out.note(fieldTable(viewFields(view)));
  const held = view.leaseRemainingMs !== null && view.leaseRemainingMs > 0;
  await confirm(
    ctx.io,
    `Release ${JSON.stringify(key)} in scope ${JSON.stringify(scope)} (${record.state}${held ? `, a worker's lease has ${view.leaseRemainingMs} ms left: its writes will be refused` : ''})? Its next message runs the handler again.`,
    ctx.yes,
  );
  const reply = await ctx.admin.release(id, {
    retentionMs: options.retentionMs,
    expectedFencingToken: record.fencingToken,
    // The token alone misses a write by the holder. Its fail turns IN_PROGRESS into FAILED with the same
    // token, and releasing that would undo a decision the operator was never shown.
    expectedState: record.state,
  });
  if (reply.outcome === 'OK') ctx.changed();
  // Said in the report too, which is all `--json --yes` prints, because the holder may still be running.
  const lease = { leaseHeld: held, leaseRemainingMs: view.leaseRemainingMs };
  const heldNote = held
    ? `; a worker's lease had ${view.leaseRemainingMs} ms left: its writes are now refused, its handler may still be running`
    : '';
  ctx.out.result({ scope, key, ...reply, ...lease }, () =>
    reply.outcome === 'OK'
      ? `Released (was ${reply.previousState}, fencing token ${reply.fencingToken}${heldNote}); the next claim runs attempt 1`
      : reply.outcome === 'TOKEN_CHANGED'
        ? `Not released: the record changed since it was read (now ${reply.state}, token ${reply.fencingToken}); inspect it again`
        : `Not released: ${reply.outcome}`,
  );
  return reply.outcome === 'OK' ? EXIT.ok : EXIT.nothingDone;
}
