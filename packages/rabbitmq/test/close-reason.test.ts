import { closeReasonOf } from '../src/close-reason';

describe('closeReasonOf', () => {
  it('reads the reply code and text of amqplib close errors', () => {
    const forced = Object.assign(
      new Error('Connection closed: 320 (CONNECTION-FORCED) with message "CONNECTION_FORCED - bye"'),
      { code: 320 },
    );
    expect(closeReasonOf(forced, 'connection')).toEqual({
      replyCode: 320,
      replyText: 'CONNECTION_FORCED - bye',
      closed: 'connection',
    });
    const channel = Object.assign(
      new Error(
        'Channel closed by server: 406 (PRECONDITION-FAILED) with message "PRECONDITION_FAILED - unknown delivery tag 1"',
      ),
      { code: 406 },
    );
    expect(closeReasonOf(channel, 'channel')).toMatchObject({
      replyCode: 406,
      replyText: 'PRECONDITION_FAILED - unknown delivery tag 1',
    });
  });

  it('is undefined without a reply code (socket error, client close)', () => {
    expect(closeReasonOf(undefined, 'connection')).toBeUndefined();
    expect(
      closeReasonOf(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), 'connection'),
    ).toBeUndefined();
  });
});
