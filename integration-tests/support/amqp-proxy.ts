import { createServer, type Server, type Socket } from 'node:net';
import { connectToBroker } from './tcp-pipe';

/** AMQP 0-9-1's protocol header, the first 8 bytes a client sends. */
const PROTOCOL_HEADER_BYTES = 8;
/** A frame: type (1), channel (2), payload size (4), payload, frame end (1). */
const FRAME_HEADER_BYTES = 7;
const METHOD_FRAME = 1;
/** The client's close methods the proxy can cut a socket at: class and method ids. */
const CLOSE_METHODS = {
  /** On channel 0. */
  'connection.close': { classId: 10, methodId: 50 },
  /** On the channel it closes. */
  'channel.close': { classId: 20, methodId: 40 },
} as const;

export type CloseMethod = keyof typeof CLOSE_METHODS;

/**
 * A TCP proxy in front of a RabbitMQ broker that plays the broker going away while the client closes its
 * connection or one of its channels: it forwards everything both ways until a client sends the close
 * method of {@link AmqpProxy.cutOn}, which it does not forward; it ends that client's socket instead (no
 * `close-ok` ever comes). With {@link AmqpProxy.holding} it plays a connection blocked by a memory or disk
 * alarm instead: the broker reads nothing more from the client, so nothing the client sends is answered.
 */
export class AmqpProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  /** How many close frames were cut off. */
  cut = 0;
  /**
   * The close method a client's socket is cut at, read for each frame (set it once the client is past the
   * closes it must get through); `undefined` forwards everything.
   */
  cutOn: CloseMethod | undefined;
  /**
   * Whether what clients send is held instead of forwarded, as RabbitMQ stops reading the socket of a
   * connection it blocked (`connection.blocked`, a memory or disk alarm): `basic.cancel`, acks,
   * `channel.close` and `connection.close` then get no answer, while the broker's frames still arrive.
   */
  holding = false;

  private constructor(server: Server) {
    this.#server = server;
  }

  /** Listens on a free port of 127.0.0.1 and forwards to the broker of `brokerUrl` (`amqp://…`). */
  static async start(brokerUrl: string): Promise<AmqpProxy> {
    const target = new URL(brokerUrl);
    const server = createServer();
    const proxy = new AmqpProxy(server);
    server.on('connection', (client) => proxy.#pipe(client, target.hostname, Number(target.port || 5672)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  /** Runs `body` with a proxy in front of the broker of `brokerUrl` and the URL through it, then closes the proxy. */
  static async using<T>(brokerUrl: string, body: (proxy: AmqpProxy, url: string) => Promise<T>): Promise<T> {
    const proxy = await AmqpProxy.start(brokerUrl);
    try {
      return await body(proxy, proxy.urlFor(brokerUrl));
    } finally {
      await proxy.close();
    }
  }

  /** `brokerUrl` with its host and port replaced by the proxy's. */
  urlFor(brokerUrl: string): string {
    const url = new URL(brokerUrl);
    const address = this.#server.address();
    if (typeof address !== 'object' || !address) throw new Error('the proxy does not listen');
    url.hostname = '127.0.0.1';
    url.port = String(address.port);
    return url.toString();
  }

  /** Stops listening and ends every connection still open. */
  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #pipe(client: Socket, host: string, port: number): void {
    const broker = connectToBroker(client, host, port, this.#sockets);
    let pending = Buffer.alloc(0);
    let headerSeen = false;
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      if (this.holding) return;
      let forward = 0;
      if (!headerSeen) {
        if (pending.length < PROTOCOL_HEADER_BYTES) return;
        headerSeen = true;
        forward = PROTOCOL_HEADER_BYTES;
      }
      while (pending.length - forward >= FRAME_HEADER_BYTES) {
        const size = pending.readUInt32BE(forward + 3);
        const end = forward + FRAME_HEADER_BYTES + size + 1;
        if (pending.length < end) break;
        if (this.cutOn && isMethod(pending, forward, CLOSE_METHODS[this.cutOn])) {
          broker.write(pending.subarray(0, forward));
          this.cut += 1;
          client.destroy();
          broker.destroy();
          return;
        }
        forward = end;
      }
      broker.write(pending.subarray(0, forward));
      pending = pending.subarray(forward);
    });
  }
}

function isMethod(buffer: Buffer, at: number, method: { classId: number; methodId: number }): boolean {
  return (
    buffer.readUInt8(at) === METHOD_FRAME &&
    buffer.readUInt16BE(at + FRAME_HEADER_BYTES) === method.classId &&
    buffer.readUInt16BE(at + FRAME_HEADER_BYTES + 2) === method.methodId
  );
}
