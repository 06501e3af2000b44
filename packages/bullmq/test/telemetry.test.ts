import { Idempotency, MemoryIdempotencyStore } from '@idempotent-consumer/core';
import type { Job } from 'bullmq';
import { producedTrace, TelemetrySdk } from '../../../integration-tests/support/telemetry';
import { idempotentProcessor } from '../src';

function job(id: string, metadata?: string): Job {
  const moveToDelayed = async () => {};
  const opts = metadata === undefined ? {} : { telemetry: { metadata } };
  return {
    id,
    data: {},
    opts,
    queueName: 'pay',
    queueQualifiedName: 'bull:pay',
    attemptsMade: 0,
    moveToDelayed,
  } as unknown as Job;
}

describe('idempotentProcessor telemetry', () => {
  it("a span per job: messaging.system bullmq, the queue, the job id, the broker action, the producer's trace as parent", async () => {
    const sdk = new TelemetrySdk();
    const { tracerProvider, meterProvider } = sdk;
    const idempotency = new Idempotency(
      { store: new MemoryIdempotencyStore(), logger: false },
      { leaseMs: 1000 },
    );
    const traces: (string | undefined)[] = [];
    const processor = idempotentProcessor(
      { idempotency, logger: false },
      { telemetry: { tracerProvider, meterProvider } },
      () => {
        traces.push(sdk.activeTraceId());
        return 1;
      },
    );
    const produced = producedTrace();
    await processor(job('pay-1', JSON.stringify({ traceparent: produced.traceparent })));
    await processor(job('pay-1'));
    await processor(job('pay-2', 'not json'));
    const spans = sdk.spans('process pay');
    expect(
      spans.map((s) => [s.attributes['messaging.message.id'], s.attributes['idempotency.broker_action']]),
    ).toEqual([
      ['pay-1', 'complete'],
      ['pay-1', 'complete'],
      ['pay-2', 'complete'],
    ]);
    expect(spans[0]!.attributes).toMatchObject({
      'messaging.system': 'bullmq',
      'messaging.destination.name': 'pay',
      'idempotency.scope': 'pay',
      'idempotency.outcome': 'ACQUIRED',
    });
    expect(spans[1]!.attributes['idempotency.outcome']).toBe('DUPLICATE');
    expect(spans[0]!.spanContext().traceId).toBe(produced.traceId);
    expect(traces[0]).toBe(produced.traceId);
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({
      complete: 3,
    });
    processor.close();
    await sdk.close();
  });
});
