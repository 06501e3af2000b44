import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { TopologyMismatchError } from '@idempotent-consumer/core';
import { SqsOperationError } from './errors';
import type { DeadLetterTarget } from './options';
import { abortableBy, type SqsClientLike } from './sqs-client';

/**
 * Where dead-lettered messages of a queue go, as checked against SQS at start:
 * - `queue`: the adapter sends a copy to `queueUrl` (the queue exists) and deletes the original;
 * - `redrive-policy`: the source queue's `RedrivePolicy` moves a message to `deadLetterTargetArn` once
 *   its `ApproximateReceiveCount` passes `maxReceiveCount`.
 */
export type DeadLetterRoute =
  | { readonly kind: 'queue'; readonly queueUrl: string }
  | {
      readonly kind: 'redrive-policy';
      readonly deadLetterTargetArn: string;
      readonly maxReceiveCount: number;
    };

/**
 * Checks that the dead-letter mode `target` can work for the queue `queueUrl`, with `GetQueueAttributes`
 * (the credentials need `sqs:GetQueueAttributes` on the queue, or on the dead-letter queue for
 * `{ queueUrl }`), and returns the route.
 * @throws {@link @idempotent-consumer/core!TopologyMismatchError} (`TOPOLOGY_MISMATCH`, not retryable) when `target` is
 * `'redrive-policy'` and the queue has no usable `RedrivePolicy` (a FAILED message would then come back
 * for ever), or when a queue it names does not exist.
 * @throws {@link SqsOperationError} (retryable) when SQS did not answer, or `signal` aborted the request.
 */
export async function resolveDeadLetterRoute(
  sqs: SqsClientLike,
  queueUrl: string,
  target: DeadLetterTarget,
  signal?: AbortSignal,
): Promise<DeadLetterRoute> {
  if (target !== 'redrive-policy') {
    await queueAttributes(sqs, target.queueUrl, 'QueueArn', signal);
    return { kind: 'queue', queueUrl: target.queueUrl };
  }
  const raw = await queueAttributes(sqs, queueUrl, 'RedrivePolicy', signal);
  let policy: { deadLetterTargetArn?: unknown; maxReceiveCount?: unknown } | undefined;
  try {
    policy = raw ? JSON.parse(raw) : undefined;
  } catch {
    policy = undefined;
  }
  const maxReceiveCount = Number(policy?.maxReceiveCount);
  if (
    typeof policy?.deadLetterTargetArn !== 'string' ||
    !Number.isSafeInteger(maxReceiveCount) ||
    maxReceiveCount < 1
  ) {
    throw new TopologyMismatchError(
      `deadLetter is 'redrive-policy' but queue ${queueUrl} has no RedrivePolicy with a deadLetterTargetArn and a maxReceiveCount (got ${raw ?? 'none'}): a failed message would be received again for ever. Give the queue a RedrivePolicy, or pass deadLetter: { queueUrl }.`,
    );
  }
  return { kind: 'redrive-policy', deadLetterTargetArn: policy.deadLetterTargetArn, maxReceiveCount };
}

async function queueAttributes(
  sqs: SqsClientLike,
  queueUrl: string,
  name: 'QueueArn' | 'RedrivePolicy',
  signal: AbortSignal | undefined,
): Promise<string | undefined> {
  try {
    const out = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: [name] }),
      abortableBy(signal),
    );
    return out.Attributes?.[name];
  } catch (error) {
    const code = (error as { name?: unknown }).name;
    if (code === 'QueueDoesNotExist' || code === 'AWS.SimpleQueueService.NonExistentQueue') {
      throw new TopologyMismatchError(`the dead-letter check found no queue ${queueUrl}`, { cause: error });
    }
    throw new SqsOperationError(`GetQueueAttributes(${name}) on ${queueUrl} failed`, { cause: error });
  }
}
