import type { IdempotencyRecord, RecordId, RedisIdempotencyAdmin } from '@idempotent-consumer/core';

/**
 * One record read with the admin's `get`. The record, `null` when there is none, or `'NOT_A_RECORD'` when the
 * key holds another type than a hash, such as another program's string or list. Redis refuses the read with
 * `WRONGTYPE`, and `release` and `purge` leave such keys alone.
 * @throws what the admin's `get` throws otherwise, such as `StoreUnavailableError` or `UnexpectedReplyError`.
 */
export async function readRecord(
  admin: RedisIdempotencyAdmin,
  id: RecordId,
): Promise<IdempotencyRecord | null | 'NOT_A_RECORD'> {
  try {
    return await admin.get(id);
  } catch (error) {
    if (isWrongType(error)) return 'NOT_A_RECORD';
    throw error;
  }
}

/**
 * Every record of a scope with its content. It runs the admin's SCAN, never KEYS, then {@link readRecord} for
 * the ids of each batch, concurrently. Records that vanish between the two are left out, and so are keys of
 * the scope that are not hashes, as `purge` keeps them.
 * @throws what the admin's `scan` or `get` throw otherwise, such as `StoreUnavailableError`.
 */
export async function* scanRecords(
  admin: RedisIdempotencyAdmin,
  scope: string,
): AsyncGenerator<{ id: RecordId; record: IdempotencyRecord }> {
  for await (const ids of admin.scan(scope)) {
    const records = await Promise.all(ids.map((id) => readRecord(admin, id)));
    for (const [i, record] of records.entries()) {
      if (record && record !== 'NOT_A_RECORD') yield { id: ids[i]!, record };
    }
  }
}

/** Whether Redis refused a read with `WRONGTYPE`, because the key holds another type than a hash. */
function isWrongType(error: unknown): boolean {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (e.message.startsWith('WRONGTYPE')) return true;
  }
  return false;
}
