/** An amqplib channel or connection, as far as closing it goes: both emit `close` once they are closed. */
export interface Closable {
  close?(): Promise<unknown>;
  on?(event: 'close', listener: () => void): unknown;
  off?(event: 'close', listener: () => void): unknown;
}

/**
 * Closes `target`: done when `close()` settles or `target` emits `close`, whichever comes first. amqplib
 * settles a channel's or a connection's `close()` only when the broker's `close-ok` arrives; when the
 * socket ends first (the broker went away during the handshake) or the connection closes first (its own
 * close, while a channel's waits: amqplib drops the channel's `close-ok` then), it closes the channel or
 * connection and emits `close`, but leaves `close()` unsettled for ever. Never rejects.
 */
export async function closeOrClosed(target: Closable): Promise<void> {
  let onClose: (() => void) | undefined;
  const closed = new Promise<void>((resolve) => {
    onClose = () => resolve();
    target.on?.('close', onClose);
  });
  try {
    // Through the executor: a close() that throws (closed already) is a rejection, ignored like one.
    const closing = new Promise((resolve) => resolve(target.close?.()));
    await Promise.race([closing.catch(() => {}), closed]);
  } finally {
    if (onClose) target.off?.('close', onClose);
  }
}

/**
 * Ends an amqplib connection by its socket, for a connection whose `close()` the broker does not answer
 * (it stopped reading a connection blocked by a memory or disk alarm): amqplib keeps the socket at
 * `connection.stream` of a `ChannelModel` (0.10 to 2.x), and destroying it with an error takes amqplib's
 * socket-error path: its channels close, its heartbeat timers stop, it emits `error` then `close`. The
 * broker then sees the TCP connection end and requeues every delivery left unacked on it. Does nothing
 * for a connection without such a socket (another client, a fake).
 */
export function endSocket(connection: unknown, reason: string): void {
  const socket = (connection as { connection?: { stream?: { destroy?: (error?: Error) => void } } })
    ?.connection?.stream;
  if (typeof socket?.destroy === 'function') socket.destroy(new Error(reason));
}
