import { type Socket, connect as tcpConnect } from 'node:net';

/**
 * The broker side of a test proxy's connection: connects `client` to `host:port`, forwards what the
 * broker sends to the client, and ends both sockets when either closes (errors ignored: a test proxy's
 * sockets are cut on purpose). Both sockets are kept in `sockets` while open. What the client sends is
 * the caller's to forward (`client.on('data', …)`), so a proxy can hold or cut it.
 * @returns the socket to the broker.
 */
export function connectToBroker(client: Socket, host: string, port: number, sockets: Set<Socket>): Socket {
  const broker = tcpConnect({ host, port });
  for (const socket of [client, broker]) {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => {
      sockets.delete(socket);
      client.destroy();
      broker.destroy();
    });
  }
  broker.on('data', (chunk: Buffer) => client.write(chunk));
  return broker;
}
