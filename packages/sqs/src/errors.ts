import { IdempotencyError, type IdempotencyErrorOptions } from '@idempotent-consumer/core';

/**
 * Stable machine-readable codes of the SQS adapter's own errors (the core's are
 * {@link @idempotent-consumer/core!IdempotencyErrorCode}).
 */
export type SqsErrorCode = 'SQS_OPERATION_FAILED' | 'DEAD_LETTER_REFUSED';

/**
 * An SQS request the adapter sent failed: the whole request (network, throttling, permissions), or one entry
 * of a batch request (`DeleteMessageBatch`, `ChangeMessageVisibilityBatch`) that SQS listed in `Failed`, such
 * as `ReceiptHandleIsInvalid` when a newer delivery of the message replaced the receipt handle. Retryable:
 * the message is still on the queue and comes back when its visibility timeout lapses, where a record in
 * the store keeps it from running twice.
 */
export class SqsOperationError extends IdempotencyError<SqsErrorCode> {
  override readonly name = 'SqsOperationError' as const;
  readonly code = 'SQS_OPERATION_FAILED' as const;
  readonly retryable = true;
  /** The per-entry error code SQS returned (`ReceiptHandleIsInvalid`, `MessageNotInflight`, …), if any. */
  readonly sqsCode: string | undefined;
  /** Whether SQS blamed the request (true) or itself (false), for a per-entry failure. */
  readonly senderFault: boolean | undefined;

  constructor(
    message: string,
    options: IdempotencyErrorOptions & {
      sqsCode?: string | undefined;
      senderFault?: boolean | undefined;
    } = {},
  ) {
    super(message, options);
    this.sqsCode = options.sqsCode;
    this.senderFault = options.senderFault;
  }
}

/**
 * SQS refused the dead-letter copy of a message (`deadLetter: { queueUrl }`) with an answer a retry does not
 * change: a client fault that is not throttling, such as `InvalidParameterValue` for a copy over the
 * dead-letter queue's `MaximumMessageSize` (`tooLarge`; the copy carries the added `x-idempotency-*`
 * attributes), a missing queue or a denied permission. Not retryable: the original is not deleted (no copy
 * was confirmed), so it comes back after each visibility timeout and is refused again until the cause is
 * fixed, or the source queue's `RedrivePolicy` moves it. Reported as `brokerError` (operation `dead-letter`).
 */
export class DeadLetterRefusedError extends IdempotencyError<SqsErrorCode> {
  override readonly name = 'DeadLetterRefusedError' as const;
  readonly code = 'DEAD_LETTER_REFUSED' as const;
  readonly retryable = false;
  /** The error name SQS answered (`InvalidParameterValue`, `QueueDoesNotExist`, `AccessDenied`, …). */
  readonly sqsCode: string | undefined;
  /** Whether SQS refused the copy for its size (over the dead-letter queue's `MaximumMessageSize`). */
  readonly tooLarge: boolean;

  constructor(
    message: string,
    options: IdempotencyErrorOptions & { sqsCode?: string | undefined; tooLarge?: boolean } = {},
  ) {
    super(message, options);
    this.sqsCode = options.sqsCode;
    this.tooLarge = options.tooLarge ?? false;
  }
}
