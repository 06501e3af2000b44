import {
  ATTR_MESSAGING_MESSAGE_ID,
  type HeaderCarrier,
  headerCarrierGetter,
  MessageTelemetry,
  type TelemetryOptions,
} from '@idempotent-consumer/core/kit';
import type { Job } from 'bullmq';

/**
 * The processor's OpenTelemetry instrumentation, as the core README's "Telemetry" describes. Its
 * `messaging.system` is `bullmq`, a value the semantic conventions do not list, the queue is the
 * destination and the job id the `messaging.message.id`. The parent is the trace context in the job's
 * `opts.telemetry.metadata` when that holds a JSON `traceparent` carrier, else the active context.
 */
export function bullMqTelemetry(
  options: TelemetryOptions | false | undefined,
): MessageTelemetry<Job, HeaderCarrier> {
  return new MessageTelemetry<Job, HeaderCarrier>(
    {
      system: 'bullmq',
      destinationOf: (job) => job.queueName,
      carrierOf: carrierOf,
      getter: headerCarrierGetter,
      describe: (job, span) => {
        if (job.id !== undefined) span.setAttribute(ATTR_MESSAGING_MESSAGE_ID, job.id);
      },
    },
    options,
  );
}

function carrierOf(job: Job): HeaderCarrier | undefined {
  const metadata = job.opts.telemetry?.metadata;
  if (typeof metadata !== 'string' || !metadata.startsWith('{')) return undefined;
  try {
    const carrier: unknown = JSON.parse(metadata);
    return typeof carrier === 'object' && carrier !== null ? (carrier as HeaderCarrier) : undefined;
  } catch {
    return undefined;
  }
}
