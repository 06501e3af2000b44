import { StoreUnavailableError } from '../errors';

/**
 * The error of a Redis command that got no reply within `commandTimeoutMs`, saying what the ioredis client
 * was doing then (its `status`), so a log line tells a slow server from one the client cannot reach:
 * `ready` (connected: the server or the network is slow), `connecting` (a first connection: ioredis holds
 * the command until it is up), `reconnecting`/`close` (the connection was lost with the command on it),
 * `end` (the client was closed with `quit()`/`disconnect()`, or stopped retrying). ioredis' own connection
 * error (such as `ECONNREFUSED`) is emitted on the client's `error` event, which the application (or an
 * adapter) listens to.
 */
export function unansweredError(timeoutMs: number, status: string | undefined): StoreUnavailableError {
  return new StoreUnavailableError(`Redis did not answer within ${timeoutMs} ms${clientState(status)}`);
}

/**
 * The error of a command the store did not send because its client is not connected (`status`), so that
 * nothing waits in ioredis's offline queue to be written after its caller gave up (see connection-check.ts).
 */
export function notConnectedError(status: string | undefined): StoreUnavailableError {
  return new StoreUnavailableError(`Redis is not connected, nothing was sent${clientState(status)}`);
}

function clientState(status: string | undefined): string {
  switch (status) {
    case 'connecting':
    case 'connect':
      return ' (the client was still connecting to it)';
    case 'reconnecting':
    case 'close':
      return ' (the client was not connected: it is reconnecting after the connection was refused or lost)';
    case 'end':
      return ' (the client was closed: quit() or disconnect() was called, or it stopped reconnecting)';
    case 'wait':
      return ' (the client had not connected yet)';
    default:
      return '';
  }
}
