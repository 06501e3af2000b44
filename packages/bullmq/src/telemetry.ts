import type { TelemetryOptions } from '@idempotent-consumer/core';
import { MessageTelemetry } from '@idempotent-consumer/core/kit';
import type { Job } from 'bullmq';

/**
 * The processor's OpenTelemetry instrumentation, as the core README's "Telemetry" describes. Its
 * `messaging.system` is `bullmq`, a value the semantic conventions do not list, the queue is the
 * destination and the job id the `messaging.message.id`. The parent is the trace context in the job's
 * `opts.telemetry.metadata` when that holds a JSON `traceparent` carrier, else the active context.
 */
export function bullMqTelemetry(options: TelemetryOptions | false | undefined): MessageTelemetry<Job> {
  return new MessageTelemetry<Job>(
    {
      system: 'bullmq',
      destinationOf: (job) => job.queueName,
      headersOf,
      attributesOf: (job): Record<string, string> =>
        job.id === undefined ? {} : { 'messaging.message.id': job.id },
    },
    options,
  );
}

/** The trace context a producer put in the job's telemetry metadata, as JSON. */
function headersOf(job: Job): Readonly<Record<string, unknown>> | undefined {
  const metadata = job.opts.telemetry?.metadata;
  if (typeof metadata !== 'string' || !metadata.startsWith('{')) return undefined;
  try {
    const carrier: unknown = JSON.parse(metadata);
    return typeof carrier === 'object' && carrier !== null ? (carrier as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
