import { randomUUID } from 'node:crypto';
import { fingerprint, Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { encodeResult } from '@idempotent-consumer/core/tools';
import type Redis from 'ioredis';
import { loadScript } from './bare-scripts';

/** Bytes per key of one record shape, and of a plain string key of the same name holding the same result. */
export interface MemoryRow {
  readonly shape: string;
  /** How many records were written. */
  readonly records: number;
  /** From `INFO` `used_memory` before and after writing `records` records, per record. */
  readonly usedMemoryPerRecord: number;
  /** Same for the plain string keys. */
  readonly referencePerRecord: number;
  /** Mean `MEMORY USAGE <key> SAMPLES 0` over a sample of the records. */
  readonly memoryUsage: number;
  readonly referenceMemoryUsage: number;
  /** Length of the stored result (after encoding), in bytes. */
  readonly resultBytes: number;
}

/** A record shape: the payload fingerprinted or not, the result, and the result codec's compression. */
interface Shape {
  readonly name: string;
  /** Share of `records` written for this shape (the 1 KiB shapes take longer and need fewer). */
  readonly share: number;
  readonly fingerprint: boolean;
  readonly result: unknown;
  readonly compressAboveBytes: number;
}

/** A small result and a 1 KiB one (JSON of repetitive order lines, as real results are). */
const SMALL = { ok: true, orderId: 'ord_7f3a91c2' };
const KIB = {
  orderId: 'ord_7f3a91c2',
  lines: Array.from({ length: 22 }, (_, i) => ({ sku: `SKU-${1000 + i}`, qty: i + 1, priceCents: 1999 + i })),
};

const SHAPES: Shape[] = [
  { name: 'small result', share: 1, fingerprint: false, result: SMALL, compressAboveBytes: 1024 },
  {
    name: 'small result + fingerprint',
    share: 1,
    fingerprint: true,
    result: SMALL,
    compressAboveBytes: 1024,
  },
  {
    name: '1 KiB result, uncompressed',
    share: 0.1,
    fingerprint: false,
    result: KIB,
    compressAboveBytes: Number.POSITIVE_INFINITY,
  },
  { name: '1 KiB result, compressed', share: 0.1, fingerprint: false, result: KIB, compressAboveBytes: 0 },
];

const SCOPE = 'orders-service/payment-captured';
const RETENTION_MS = 86_400_000;
const SAMPLE = 200;

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

async function memoryUsage(redis: Redis, keys: readonly string[]): Promise<number> {
  const pipeline = redis.pipeline();
  for (const key of keys) pipeline.call('MEMORY', 'USAGE', key, 'SAMPLES', '0');
  let sum = 0;
  for (const [error, bytes] of (await pipeline.exec())!) {
    if (error) throw error;
    sum += Number(bytes);
  }
  return sum / keys.length;
}

/**
 * For each shape, on a private server (`redis` may be flushed): writes `records` completed records (UUID
 * keys, a realistic scope) with the runner's scripts and arguments, checked field by field against a record
 * `Idempotency.run` wrote, and measures `used_memory`; flushes; writes a plain string key of the same name
 * holding the same result (`SET name result PX retention`, the stored encoding of the result) for each, and
 * measures again.
 */
export async function measureMemory(redis: Redis, records: number): Promise<MemoryRow[]> {
  const rows: MemoryRow[] = [];
  const store = new RedisIdempotencyStore({ redis });
  for (const shape of SHAPES) {
    const count = Math.round(records * shape.share);
    const keys = Array.from({ length: count }, () => randomUUID());
    const payload = { orderId: 'ord_7f3a91c2', amountCents: 4999 };
    await redis.flushdb('SYNC');
    const [claim, complete] = [await loadScript(redis, 'claim'), await loadScript(redis, 'complete')];
    // Checks that the records below are the ones the runner writes: one through Idempotency.run.
    const idempotency = new Idempotency(
      { store },
      { retentionMs: RETENTION_MS, compressAboveBytes: shape.compressAboveBytes, maxResultBytes: 1 << 20 },
    );
    const probe = { scope: SCOPE, key: 'probe', ...(shape.fingerprint && { payload }) };
    await idempotency.run(probe, async () => shape.result);
    const expected = await redis.hgetall(store.recordKey(probe));
    await redis.flushdb('SYNC');

    // The same scripts with the same arguments as Idempotency.run (claim, then complete with the encoded
    // result), pipelined 1000 at a time so that 100,000 records take seconds on a busy machine.
    const fp = shape.fingerprint ? fingerprint(payload) : '';
    const encoded = encodeResult(shape.result, {
      maxResultBytes: 1 << 20,
      onResultTooLarge: 'fail',
      compressAboveBytes: shape.compressAboveBytes,
    });
    if (encoded.kind !== 'stored') throw new Error(`the ${shape.name} result was not stored`);
    const names = keys.map((key) => store.recordKey({ scope: SCOPE, key }));
    const before = await usedMemory(redis);
    for (let i = 0; i < names.length; i += 1000) {
      const batch = names.slice(i, i + 1000);
      const claims = redis.pipeline();
      // With a nonce, as the store claims (lua/claim.lua ARGV[7]): the completion drops it.
      for (const [j, name] of batch.entries()) {
        claims.evalsha(claim.sha1, 1, name, 30_000, RETENTION_MS, fp, 0, '0', '', `bench-${i + j}`);
      }
      const tokens = (await claims.exec())!.map(([error, reply]) => {
        if (error || (reply as unknown[])[0] !== 'ACQUIRED') throw error ?? new Error(String(reply));
        return (reply as unknown[])[1] as number;
      });
      const completes = redis.pipeline();
      for (const [j, name] of batch.entries()) {
        completes.evalsha(complete.sha1, 1, name, tokens[j]!, RETENTION_MS, '1', encoded.value);
      }
      for (const [error] of (await completes.exec())!) if (error) throw error;
    }
    const after = await usedMemory(redis);
    const sample = names.slice(0, SAMPLE);
    const written = await redis.hgetall(names[0]!);
    const fields = (r: Record<string, string>) => Object.keys(r).sort().join(',');
    if (fields(written) !== fields(expected) || written.r !== expected.r || written.f !== expected.f) {
      throw new Error(`bench records differ from the runner's: ${fields(written)} vs ${fields(expected)}`);
    }
    const stored = (await redis.hget(names[0]!, 'r')) ?? '';
    const memoryUsageRecord = await memoryUsage(redis, sample);

    await redis.flushdb('SYNC');
    const refBefore = await usedMemory(redis);
    for (let i = 0; i < names.length; i += 1000) {
      const pipeline = redis.pipeline();
      for (const name of names.slice(i, i + 1000)) pipeline.set(name, stored, 'PX', RETENTION_MS);
      await pipeline.exec();
    }
    const refAfter = await usedMemory(redis);
    rows.push({
      shape: shape.name,
      usedMemoryPerRecord: (after - before) / count,
      records: count,
      referencePerRecord: (refAfter - refBefore) / count,
      memoryUsage: memoryUsageRecord,
      referenceMemoryUsage: await memoryUsage(redis, sample),
      resultBytes: Buffer.byteLength(stored),
    });
    await redis.flushdb('SYNC');
  }
  return rows;
}
