import { DEAD_LETTER_FIELDS } from '@idempotent-consumer/core/kit';
import { buildDeadLetter, DEAD_LETTER_HEADERS } from '../src/dead-letter';
import { isFatalToConsumer } from '../src/errors';
import { defaultKeyExtractor, headerText } from '../src/headers';
import { message } from './fakes';

describe('headers and keys', () => {
  it('reads the first header value as text', () => {
    expect(headerText({ a: Buffer.from('x'), b: ['y', 'z'], c: '' }, 'a')).toBe('x');
    expect(headerText({ b: [Buffer.from('y'), 'z'] }, 'b')).toBe('y');
    expect(headerText({ c: '' }, 'c')).toBeUndefined();
    expect(headerText(undefined, 'a')).toBeUndefined();
  });

  it('takes the idempotency-key header, else topic/partition/offset', () => {
    expect(
      defaultKeyExtractor(message(5, 'v', { 'idempotency-key': 'k' }), { topic: 't', partition: 1 }),
    ).toBe('k');
    expect(defaultKeyExtractor(message(5, 'v'), { topic: 't', partition: 1 })).toBe('t/1/5');
  });

  it('keeps the original headers in a dead letter and adds its own', () => {
    const letter = buildDeadLetter({
      topic: 't',
      partition: 2,
      message: message(9, 'v', { trace: 'abc' }),
      reason: 'failed-record',
      outcome: 'FAILED',
      error: 'Error: x',
      attempt: 4,
      scope: 'g/t',
      key: 'k',
    });
    expect(letter.value?.toString()).toBe('v');
    expect(letter.headers).toEqual({
      trace: 'abc',
      'x-idempotency-dead-letter-reason': 'failed-record',
      'x-idempotency-outcome': 'FAILED',
      'x-idempotency-error': 'Error: x',
      'x-idempotency-attempt': '4',
      'x-idempotency-key': 'k',
      'x-idempotency-scope': 'g/t',
      'x-original-topic': 't',
      'x-original-partition': '2',
      'x-original-offset': '9',
      'x-original-timestamp': '1700000000000',
    });
  });

  it('writes NONE as the outcome when no claim was made, and the core field names', () => {
    const letter = buildDeadLetter({
      topic: 't',
      partition: 0,
      message: message(1, 'v'),
      reason: 'missing-key',
      error: 'no key',
      attempt: 0,
      scope: 'g/t',
      key: undefined,
    });
    expect(letter.headers).toMatchObject({
      'x-idempotency-dead-letter-reason': 'missing-key',
      'x-idempotency-outcome': 'NONE',
    });
    expect(letter.headers).not.toHaveProperty('x-idempotency-key');
    const { reason, outcome, error, attempt, key, scope } = DEAD_LETTER_HEADERS;
    expect({ reason, outcome, error, attempt, key, scope }).toEqual(DEAD_LETTER_FIELDS);
  });

  it('knows which errors would stop KafkaJS for good', () => {
    expect(isFatalToConsumer(new TypeError('x'))).toBe(true);
    expect(isFatalToConsumer({ name: 'KafkaJSNonRetriableError' })).toBe(true);
    expect(
      isFatalToConsumer({ name: 'KafkaJSProtocolError', retriable: false, type: 'UNKNOWN_MEMBER_ID' }),
    ).toBe(false);
    expect(
      isFatalToConsumer({ name: 'KafkaJSProtocolError', retriable: true, type: 'REBALANCE_IN_PROGRESS' }),
    ).toBe(false);
    expect(isFatalToConsumer(new Error('x'))).toBe(false);
  });
});
