import { IdempotencyError, type IdempotencyErrorCode, isIdempotencyError } from '@idempotent-consumer/core';
import { type KafkaErrorCode, PartitionPausedError } from '../src';
import { partitionPausedError } from '../src/errors';

// The adapter's code is its own: it is not one of the core's codes (a compile error here if it were).
type NotACoreCode = KafkaErrorCode extends IdempotencyErrorCode ? never : true;
const notACoreCode: NotACoreCode = true;

describe('PartitionPausedError', () => {
  it('is an IdempotencyError with the adapter-owned code PARTITION_PAUSED', () => {
    const error = new PartitionPausedError('paused', 'orders', 2, 500);
    expect(notACoreCode).toBe(true);
    expect(error).toBeInstanceOf(IdempotencyError);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(isIdempotencyError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'PARTITION_PAUSED', retryable: true, topic: 'orders', partition: 2 });
  });

  it('the variant built on KafkaJSError is still recognised by code', () => {
    const error = partitionPausedError('paused', 'orders', 0, undefined);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(isIdempotencyError(error)).toBe(true);
    expect(error.code).toBe('PARTITION_PAUSED');
  });
});
