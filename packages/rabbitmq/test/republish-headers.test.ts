import type { ConsumeMessage } from 'amqplib';
import type { MessageSubject } from '../src';
import { RETRY_HEADERS } from '../src';
import { retryHeaders } from '../src/republish-headers';

const message = {
  properties: { headers: { 'x-idempotency-error': 'Error: an earlier one' } },
} as unknown as ConsumeMessage;
const subject = { outcome: 'ACQUIRED' } as unknown as MessageSubject;
const retry = {
  action: 'retry',
  reason: 'handler-error',
  delayMs: 1000,
  wantedDelayMs: 400,
  attempt: 2,
} as const;

describe('retryHeaders: the decision carries what the handler threw, the copy its text', () => {
  it('writes the thrown error described (Name [CODE]: message)', () => {
    const headers = retryHeaders(message, subject, { ...retry, error: new TypeError('card declined') });
    expect(headers[RETRY_HEADERS.error]).toBe('TypeError: card declined');
  });

  it('removes an earlier copy’s error when this retry has none (a CONFLICT)', () => {
    const headers = retryHeaders(message, subject, { ...retry, reason: 'conflict', error: undefined });
    expect(RETRY_HEADERS.error in headers).toBe(false);
  });
});
