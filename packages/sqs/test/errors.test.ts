import { IdempotencyError, type IdempotencyErrorCode, isIdempotencyError } from '@idempotent-consumer/core';
import { DeadLetterRefusedError, type SqsErrorCode, SqsOperationError } from '../src';

// The adapter's code is its own: it is not one of the core's codes (a compile error here if it were).
type NotACoreCode = SqsErrorCode extends IdempotencyErrorCode ? never : true;
const notACoreCode: NotACoreCode = true;

describe('SqsOperationError', () => {
  it('is an IdempotencyError with the adapter-owned code SQS_OPERATION_FAILED', () => {
    const error = new SqsOperationError('delete failed', {
      sqsCode: 'ReceiptHandleIsInvalid',
      senderFault: true,
    });
    expect(notACoreCode).toBe(true);
    expect(error).toBeInstanceOf(IdempotencyError);
    expect(isIdempotencyError(error)).toBe(true);
    expect(error).toMatchObject({
      code: 'SQS_OPERATION_FAILED',
      retryable: true,
      sqsCode: 'ReceiptHandleIsInvalid',
    });
  });
});

describe('DeadLetterRefusedError', () => {
  it('is a non-retryable IdempotencyError with the adapter-owned code DEAD_LETTER_REFUSED', () => {
    const cause = new Error('Message must be shorter than 1024 bytes.');
    const error = new DeadLetterRefusedError('refused', {
      cause,
      sqsCode: 'InvalidParameterValue',
      tooLarge: true,
    });
    expect(isIdempotencyError(error)).toBe(true);
    expect(error).toMatchObject({
      name: 'DeadLetterRefusedError',
      code: 'DEAD_LETTER_REFUSED',
      retryable: false,
      sqsCode: 'InvalidParameterValue',
      tooLarge: true,
      cause,
    });
  });
});
