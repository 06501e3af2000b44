import { setTimeout as sleep } from 'node:timers/promises';
import type { Producer } from 'kafkajs';

/**
 * Payments `p0` … `p<total-1>` keyed `pay-0` … `pay-<total-1>` (the `idempotency-key` header), all to
 * `partition` when given, else spread over the partitions by KafkaJS.
 */
export function payments(
  total: number,
  partition?: number,
): { value: string; headers: { 'idempotency-key': string }; partition?: number }[] {
  return Array.from({ length: total }, (_, i) => ({
    value: `p${i}`,
    headers: { 'idempotency-key': `pay-${i}` },
    ...(partition === undefined ? {} : { partition }),
  }));
}

/**
 * Produces the {@link payments} to `topic` one message a request, `gapMs` apart, so they keep arriving while
 * the test does something else; resolves once the last one is sent, rejects on a send that failed.
 */
export async function producePaymentsSlowly(
  producer: Producer,
  topic: string,
  total: number,
  gapMs: number,
): Promise<void> {
  for (const message of payments(total)) {
    await producer.send({ topic, messages: [message] });
    await sleep(gapMs);
  }
}
