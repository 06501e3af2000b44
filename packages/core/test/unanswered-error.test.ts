import { StoreUnavailableError } from '../src';
import { unansweredError } from '../src/store/unanswered-error';

describe('unansweredError: the timeout of a Redis command says what the client was doing', () => {
  it.each([
    ['ready', 'Redis did not answer within 2000 ms'],
    [undefined, 'Redis did not answer within 2000 ms'],
    ['connecting', 'Redis did not answer within 2000 ms (the client was still connecting to it)'],
    [
      'reconnecting',
      'Redis did not answer within 2000 ms (the client was not connected: it is reconnecting after the connection was refused or lost)',
    ],
    [
      'end',
      'Redis did not answer within 2000 ms (the client was closed: quit() or disconnect() was called, or it stopped reconnecting)',
    ],
  ])('status %s', (status, message) => {
    const error = unansweredError(2000, status);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true, message });
  });
});
