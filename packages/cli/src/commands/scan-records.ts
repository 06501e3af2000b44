import type { IdempotencyRecord, RecordId, RedisIdempotencyAdmin } from '@idempotent-consumer/core';

/**
 * Every record of a scope with its content: the admin's SCAN (never KEYS), then the store's `get` for
 * the ids of each batch, concurrently. Records that vanish between the two are left out.
 */
export async function* scanRecords(
  admin: RedisIdempotencyAdmin,
  scope: string,
): AsyncGenerator<{ id: RecordId; record: IdempotencyRecord }> {
  for await (const ids of admin.scan(scope)) {
    const records = await Promise.all(ids.map((id) => admin.get(id)));
    for (const [i, record] of records.entries()) if (record) yield { id: ids[i]!, record };
  }
}
