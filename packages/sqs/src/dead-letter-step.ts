import type { Message } from '@aws-sdk/client-sqs';
import { describeError, type RunOutcome } from '@idempotent-consumer/core';
import { sendToDeadLetterQueue } from './dead-letter';
import type { DeadLetterRoute } from './dead-letter-route';
import type { Decision } from './decide';
import { DeadLetterRefusedError } from './errors';
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
 * receive that reaches it). Resolves `ok: false` with the error when the check or the copy failed (a
 * {@link DeadLetterRefusedError} when SQS refused the copy for good, or `signal` aborted it): the message is
 * then left invisible (`dead-letter-failed`) and comes back after its visibility timeout.
 */
export async function carryOutDeadLetter(
  sqs: SqsClientLike,
  route: () => Promise<DeadLetterRoute>,
  message: Message,
  decision: Extract<Decision, { action: 'dead-letter' }>,
  details: { outcome: RunOutcome | undefined; key: string | undefined; scope: string },
  signal?: AbortSignal,
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
    await sendToDeadLetterQueue(
      sqs,
      resolved.queueUrl,
      message,
      decision.reason,
      decision.error,
      { ...details, attempt: decision.attempt },
      signal,
    );
  } catch (error) {
    return { ok: false, error: refusedForGood(error, resolved.queueUrl, message) ?? error };
  }
  return { ok: true, delivery: { via: 'copy', destination: resolved.queueUrl, final: true } };
}

/**
 * The error of a dead-letter `SendMessage` as a {@link DeadLetterRefusedError} when no retry can change the
 * answer: a client fault (`$fault: 'client'`) that is not throttling (`$retryable`), so the user learns
 * why the message keeps coming back instead of seeing the same raw error every visibility timeout.
 * `undefined` for any other error (network, server, throttling: the next receive may well succeed).
 */
function refusedForGood(
  error: unknown,
  queueUrl: string,
  message: Message,
): DeadLetterRefusedError | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { $fault, $retryable, name } = error as { $fault?: unknown; $retryable?: unknown; name?: unknown };
  if ($fault !== 'client' || $retryable) return undefined;
  const sqsCode = typeof name === 'string' ? name : undefined;
  const text = describeError(error);
  // SQS: "One or more parameters are invalid. Reason: Message must be shorter than 262144 bytes."
  const tooLarge = /shorter than|too long/i.test(text);
  const why = tooLarge
    ? "the copy, with its added x-idempotency-* attributes, is larger than the dead-letter queue's MaximumMessageSize"
    : 'a retry will not change the answer';
  return new DeadLetterRefusedError(
    `SQS refused the dead-letter copy of message ${message.MessageId ?? '(no MessageId)'} to ${queueUrl} (${text}): ${why}. The message is not deleted: it comes back after each visibility timeout until the cause is fixed, or the source queue's RedrivePolicy moves it`,
    { cause: error, sqsCode, tooLarge },
  );
}
