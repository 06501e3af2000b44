import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

/** The JSON body every bench request sends. */
export const REQUEST_BODY = JSON.stringify({ amount: 100, currency: 'EUR' });

/** What one answer was: its status, and whether it was marked a replay. */
export interface Answer {
  readonly status: number;
  readonly replayed: boolean;
}

/**
 * A keep-alive HTTP/1.1 client of one server (undici `Pool`, one connection per request in flight), in
 * the bench's process: the same client for every contender, so its cost is the same on every row.
 */
export class BenchClient {
  readonly #pool: Pool;

  constructor(url: string, connections: number) {
    this.#pool = new Pool(url, { connections, pipelining: 1 });
  }

  /** `POST path` with the bench's JSON body and `Idempotency-Key: key`; reads the body to the end. */
  async post(path: string, key: string): Promise<Answer> {
    const { statusCode, headers, body } = await this.#pool.request({
      path,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: REQUEST_BODY,
    });
    await body.dump();
    return { status: statusCode, replayed: headers['idempotent-replayed'] !== undefined };
  }

  close(): Promise<void> {
    return this.#pool.close();
  }
}

/** The `http://127.0.0.1:port` of a listening Node server. */
export function urlOf(server: Server): string {
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Starts a Node request listener on 127.0.0.1 and a random port. */
export async function listen(server: Server): Promise<{ url: string; close(): Promise<void> }> {
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  return {
    url: urlOf(server),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
