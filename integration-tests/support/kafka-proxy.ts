import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import type { ISocketFactory } from 'kafkajs';
import { connectToBroker } from './tcp-pipe';

/**
 * TCP proxies in front of the brokers of a Kafka cluster that play a broker which stops answering: each
 * forwards both ways until {@link KafkaProxy.stall}, after which what a client sends is held, never
 * reaching the broker (so no answer comes). A KafkaJS client reaches the brokers through them with
 * {@link KafkaProxy.socketFactory}: it maps each broker's `host:port` (the seeds and the addresses the
 * metadata advertises, which are the same on the mock cluster) to its proxy.
 */
export class KafkaProxy {
  readonly #servers: Server[];
  /** `host:port` of a broker to the port of its proxy on 127.0.0.1. */
  readonly #ports: Map<string, number>;
  readonly #sockets = new Set<Socket>();
  #stalled = false;
  /** How many bytes clients sent since {@link KafkaProxy.stall} (held, never forwarded). */
  heldBytes = 0;

  private constructor(servers: Server[], ports: Map<string, number>) {
    this.#servers = servers;
    this.#ports = ports;
  }

  /** Starts one proxy on a free port of 127.0.0.1 for each broker of `brokers` (`host:port,…`). */
  static async start(brokers: string): Promise<KafkaProxy> {
    const servers: Server[] = [];
    const ports = new Map<string, number>();
    const proxy = new KafkaProxy(servers, ports);
    for (const broker of brokers.split(',')) {
      const [host, port] = [broker.slice(0, broker.lastIndexOf(':')), Number(broker.split(':').pop())];
      const server = createServer((client) => proxy.#pipe(client, host, port));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      servers.push(server);
      ports.set(broker, (server.address() as { port: number }).port);
    }
    return proxy;
  }

  /**
   * KafkaJS's `socketFactory`: connects to the proxy of `host:port`.
   * @throws Error for an address that is not one of the brokers (the client would bypass the proxies).
   */
  readonly socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
    const proxied = this.#ports.get(`${host}:${port}`);
    if (proxied === undefined) throw new Error(`no proxy for the broker ${host}:${port}`);
    return tcpConnect({ host: '127.0.0.1', port: proxied }, onConnect);
  };

  /** From now on nothing a client sends reaches a broker: requests in flight and new ones go unanswered. */
  stall(): void {
    this.#stalled = true;
  }

  /** Stops listening and ends every connection (a client's requests held then fail). */
  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await Promise.all(this.#servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }

  #pipe(client: Socket, host: string, port: number): void {
    const broker = connectToBroker(client, host, port, this.#sockets);
    client.on('data', (chunk: Buffer) => {
      if (this.#stalled) this.heldBytes += chunk.length;
      else broker.write(chunk);
    });
  }
}
