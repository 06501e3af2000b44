/**
 * Why RabbitMQ closed a channel or a connection: the `reply-code` and `reply-text` of its `channel.close`
 * or `connection.close` method (AMQP 0-9-1 §1.4.2.7, §1.5.2.3), for example `320` / `CONNECTION_FORCED -
 * Closed via management plugin` when an operator closed the connection, or `406` / `PRECONDITION_FAILED -
 * unknown delivery tag 1` for a channel error.
 */
export interface CloseReason {
  /** The AMQP reply code (320 connection forced, 404 not found, 406 precondition failed, 541 internal error…). */
  readonly replyCode: number;
  /** The broker's reply text. */
  readonly replyText: string;
  /** Whether the broker closed the whole connection (its channels closed with it) or only the channel. */
  readonly closed: 'connection' | 'channel';
}

/**
 * Reads the {@link CloseReason} from an amqplib close error: amqplib (0.10, 2.x) sets `code` to the
 * reply code and writes the reply text into the message as `… with message "<reply-text>"`. `undefined`
 * for an error that carries no reply code (a socket error, a heartbeat timeout) or no error at all (a
 * close the client asked for).
 */
export function closeReasonOf(error: unknown, closed: CloseReason['closed']): CloseReason | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code !== 'number' || !Number.isInteger(code)) return undefined;
  const text = typeof message === 'string' ? /with message "([\s\S]*)"/.exec(message)?.[1] : undefined;
  return { replyCode: code, replyText: text ?? (typeof message === 'string' ? message : ''), closed };
}
