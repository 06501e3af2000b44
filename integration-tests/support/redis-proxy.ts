import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

/** How a {@link RedisProxy} treats traffic: forwards it, drops it, or refuses connections. */
export type ProxyMode = 'forward' | 'drop' | 'refuse';

/** One client's connection through the proxy: both sockets and what each side sent while held. */
interface Link {
  readonly client: Socket;
  readonly server: Socket;
  readonly toServer: Buffer[];
  readonly toClient: Buffer[];
}

/**
 * A TCP proxy in front of a Redis server on 127.0.0.1 that plays the two outages a network gives:
 *
 * - `drop()`: packets are dropped, nothing is reset. Connections stay open, and what either side sends is
 *   held, as TCP keeps retransmitting it; a new connection is accepted and held the same way (its ready
 *   check gets no answer). `forward()` delivers everything held, in order, as the retransmissions that get
 *   through once the network heals: commands a client gave up on reach Redis late.
 * - `refuse()`: every connection is reset and new ones are refused (a server that stopped, a firewall that
 *   rejects): the client sees the connection drop and reconnects until `forward()`.
 */
export class RedisProxy {
  readonly #server: Server;
  readonly #links = new Set<Link>();
  #mode: ProxyMode = 'forward';
  /** Bytes clients sent while traffic was dropped (delivered to Redis late, on `forward()`). */
  heldBytes = 0;

  private constructor(
    server: Server,
    readonly port: number,
  ) {
    this.#server = server;
  }

  /** Starts a proxy on a free port of 127.0.0.1 in front of Redis on `targetPort`. */
  static async start(targetPort: number): Promise<RedisProxy> {
    const server = createServer({ pauseOnConnect: false });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new RedisProxy(server, (server.address() as { port: number }).port);
    server.on('connection', (client) => proxy.#link(client, targetPort));
    return proxy;
  }

  /** `redis://127.0.0.1:<port>` of the proxy. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** How traffic is treated now. */
  get mode(): ProxyMode {
    return this.#mode;
  }

  /** From now on nothing gets through either way, and nothing is reset (see the class comment). */
  drop(): void {
    this.#mode = 'drop';
  }

  /** Resets every connection, and every new one, until {@link RedisProxy.forward}. */
  refuse(): void {
    this.#mode = 'refuse';
    for (const link of this.#links) this.#reset(link);
  }

  /** Forwards again, first delivering what was held while traffic was dropped, in order. */
  forward(): void {
    this.#mode = 'forward';
    for (const link of this.#links) {
      for (const chunk of link.toServer.splice(0)) link.server.write(chunk);
      for (const chunk of link.toClient.splice(0)) link.client.write(chunk);
    }
  }

  /** Stops listening and resets every connection. */
  async close(): Promise<void> {
    for (const link of this.#links) this.#reset(link);
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #link(client: Socket, targetPort: number): void {
    client.on('error', () => {});
    if (this.#mode === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const server = tcpConnect({ host: '127.0.0.1', port: targetPort });
    server.on('error', () => {});
    const link: Link = { client, server, toServer: [], toClient: [] };
    this.#links.add(link);
    // Data a side sent before the other side connected is queued by Node; held data is queued here.
    client.on('data', (chunk: Buffer) => {
      if (this.#mode === 'drop') {
        this.heldBytes += chunk.length;
        link.toServer.push(chunk);
      } else server.write(chunk);
    });
    server.on('data', (chunk: Buffer) => {
      if (this.#mode === 'drop') link.toClient.push(chunk);
      else client.write(chunk);
    });
    const end = () => {
      this.#links.delete(link);
      client.destroy();
      server.destroy();
    };
    client.on('close', end);
    server.on('close', end);
  }

  #reset(link: Link): void {
    this.#links.delete(link);
    link.client.resetAndDestroy();
    link.server.destroy();
  }
}
