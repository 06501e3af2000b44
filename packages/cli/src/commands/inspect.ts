import { EXIT } from '../io';
import { fieldTable } from '../output';
import { RECORD_FLAGS, type RecordView, recordView } from '../record-view';
import type { CommandContext } from './context';
import { readRecord } from './scan-records';

/**
 * `inspect SCOPE KEY` shows one record from the store's `get`, with its lease measured on the Redis server
 * clock. Exit status 3 when there is no record, and when the key holds another type than a hash, shown as
 * `notARecord` in `--json`.
 */
export async function inspect(
  ctx: CommandContext,
  scope: string,
  key: string,
  options: { previewChars: number },
): Promise<number> {
  const id = { scope, key };
  const [record, serverTimeMs] = await Promise.all([readRecord(ctx.admin, id), ctx.admin.serverTimeMs(id)]);
  if (record === 'NOT_A_RECORD') {
    ctx.out.result({ scope, key, found: false, notARecord: true }, () => `Key ${notARecordText(scope, key)}`);
    return EXIT.nothingDone;
  }
  if (!record) {
    ctx.out.result(
      { scope, key, found: false },
      () => `No record for key ${JSON.stringify(key)} in scope ${JSON.stringify(scope)}`,
    );
    return EXIT.nothingDone;
  }
  const view = recordView(id, record, serverTimeMs, options.previewChars);
  ctx.out.result({ found: true, ...view }, () => fieldTable(viewFields(view)));
  return EXIT.ok;
}

/**
 * What `inspect` and `release` say of a key that holds another type than a hash, after the word "key". The
 * key, its scope, and why it is left alone.
 */
export function notARecordText(scope: string, key: string): string {
  return `${JSON.stringify(key)} in scope ${JSON.stringify(scope)} is not an idempotency record (not a hash: another program's key)`;
}

/** The rows of one record's field/value table. */
export function viewFields(view: RecordView): [string, string | number][] {
  const rows: [string, string | number][] = [
    ['scope', view.scope],
    ['key', view.key],
    ['state', view.state],
    ['fencing token', view.fencingToken],
    ['attempt', view.attempt],
  ];
  for (const flag of RECORD_FLAGS) if (view[flag.field]) rows.push([flag.name, `yes: ${flag.meaning}`]);
  if (view.leaseRemainingMs !== null) {
    const lease =
      // Held while its expiry is after the server time, as in claim.lua. At 0 the next claim takes it over.
      view.leaseRemainingMs > 0
        ? `${view.leaseRemainingMs} ms remaining (until ${view.leaseExpiresAt})`
        : `lapsed ${-view.leaseRemainingMs} ms ago (the next claim takes it over)`;
    rows.push(['lease', lease]);
  }
  rows.push(
    ['created', view.createdAt ?? '(not kept once completed)'],
    ['updated', view.updatedAt],
    ['expires in', view.ttlMs < 0 ? 'never (no TTL)' : `${view.ttlMs} ms`],
    ['fingerprint', view.fingerprint || '(none)'],
  );
  if (view.resultPreview !== null) rows.push(['result', view.resultPreview]);
  if (view.errorPreview !== null) rows.push(['error', view.errorPreview]);
  return rows;
}
