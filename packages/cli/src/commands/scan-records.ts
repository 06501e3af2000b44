import type { IdempotencyRecord, RecordId, RedisIdempotencyAdmin } from '@idempotent-consumer/core';

/**
 * Every record of a scope with its content: the admin's SCAN (never KEYS), then the store's `get` for
 * the ids of each batch, concurrently. Records that vanish between the two are left out, and so are keys
 * of the scope that are not hashes (another program's string, list...: `get` fails with `WRONGTYPE`), as
 * `purge` keeps them (`NOT_A_RECORD`).
 * @throws what the admin's `scan` or `get` throw otherwise (`StoreUnavailableError`, `UnexpectedReplyError`).
 */
export async function* scanRecords(
  admin: RedisIdempotencyAdmin,
  scope: string,
): AsyncGenerator<{ id: RecordId; record: IdempotencyRecord }> {
  for await (const ids of admin.scan(scope)) {
    const records = await Promise.all(
      ids.map((id) =>
        admin.get(id).catch((error: unknown) => {
          if (isWrongType(error)) return null;
          throw error;
        }),
      ),
    );
    for (const [i, record] of records.entries()) if (record) yield { id: ids[i]!, record };
  }
}

/** Whether Redis refused a read because the key holds another type than a hash (`WRONGTYPE`). */
function isWrongType(error: unknown): boolean {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (e.message.startsWith('WRONGTYPE')) return true;
  }
  return false;
}
