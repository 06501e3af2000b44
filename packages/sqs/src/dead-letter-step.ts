import type { Message } from '@aws-sdk/client-sqs';
import type { RunOutcome } from '@idempotent-consumer/core';
import { sendToDeadLetterQueue } from './dead-letter';
import type { DeadLetterRoute } from './dead-letter-route';
import type { Decision } from './decide';
import { receiveCount } from './message-attributes';
import type { DeadLetterDelivery } from './processed';
import type { SqsClientLike } from './sqs-client';

/** What carrying out a dead-letter decision ended with. */
export type DeadLetterStep =
  | { readonly ok: true; readonly delivery: DeadLetterDelivery }
  | { readonly ok: false; readonly error: unknown };

/**
 * Carries out a `dead-letter` decision for one message: checks the route (once, `route()`), then sends a
 * copy to the dead-letter queue (the caller deletes the original), or, with the redrive policy, leaves the
 * caller to make it visible at once (SQS moves it after `maxReceiveCount` receives; `final` is set on the
 * receive that reaches it). Resolves `ok: false` with the error when the check or the copy failed: the
 * message is then left invisible (`dead-letter-failed`) and comes back after its visibility timeout.
 */
export async function carryOutDeadLetter(
  sqs: SqsClientLike,
  route: () => Promise<DeadLetterRoute>,
  message: Message,
  decision: Extract<Decision, { action: 'dead-letter' }>,
  details: { outcome: RunOutcome | undefined; key: string | undefined; scope: string },
): Promise<DeadLetterStep> {
  let resolved: DeadLetterRoute;
  try {
    resolved = await route();
  } catch (error) {
    return { ok: false, error };
  }
  if (resolved.kind === 'redrive-policy') {
    return {
      ok: true,
      delivery: {
        via: 'redrive-policy',
        destination: resolved.deadLetterTargetArn,
        final: receiveCount(message) >= resolved.maxReceiveCount,
      },
    };
  }
  try {
    await sendToDeadLetterQueue(sqs, resolved.queueUrl, message, decision.reason, decision.error, {
      ...details,
      attempt: decision.attempt,
    });
  } catch (error) {
    return { ok: false, error };
  }
  return { ok: true, delivery: { via: 'copy', destination: resolved.queueUrl, final: true } };
}
