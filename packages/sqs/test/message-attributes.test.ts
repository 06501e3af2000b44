import {
  defaultIdempotencyKey,
  queueNameFromUrl,
  receiveCount,
  toVisibilitySeconds,
} from '../src/message-attributes';

describe('message attributes', () => {
  it('takes the idempotency-key attribute, else the MessageId', () => {
    expect(
      defaultIdempotencyKey({
        MessageId: 'm',
        MessageAttributes: { 'idempotency-key': { DataType: 'String', StringValue: 'k' } },
      }),
    ).toBe('k');
    expect(defaultIdempotencyKey({ MessageId: 'm' })).toBe('m');
    expect(defaultIdempotencyKey({})).toBeUndefined();
  });

  it('reads ApproximateReceiveCount, 1 when missing or unreadable', () => {
    expect(receiveCount({ Attributes: { ApproximateReceiveCount: '4' } })).toBe(4);
    expect(receiveCount({ Attributes: { ApproximateReceiveCount: 'x' } })).toBe(1);
    expect(receiveCount({})).toBe(1);
  });

  it('rounds milliseconds up to whole visibility seconds within [0, 43200]', () => {
    expect(toVisibilitySeconds(0)).toBe(0);
    expect(toVisibilitySeconds(1)).toBe(1);
    expect(toVisibilitySeconds(1000)).toBe(1);
    expect(toVisibilitySeconds(1001)).toBe(2);
    expect(toVisibilitySeconds(1e12)).toBe(43_200);
    expect(toVisibilitySeconds(Number.NaN)).toBe(0);
  });

  it('names the scope after the queue', () => {
    expect(queueNameFromUrl('https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo')).toBe(
      'orders.fifo',
    );
    expect(queueNameFromUrl('http://127.0.0.1:4566/000000000000/q/')).toBe('q');
  });
});
