import type { AddressInfo } from 'node:net';
import { Idempotency, type IdempotencyLogger, MemoryIdempotencyStore } from '@idempotent-consumer/core';
import express from 'express';
import { createIdempotencyMiddleware, recordIdempotencyError } from '../src/express';

/** A runner on a memory store whose logger keeps the warnings. */
function runner(): { idempotency: Idempotency; warnings: string[] } {
  const warnings: string[] = [];
  const logger: IdempotencyLogger = { warn: (message) => warnings.push(message), error: () => undefined };
  const idempotency = new Idempotency({ store: new MemoryIdempotencyStore(), logger }, { leaseMs: 5_000 });
  return { idempotency, warnings };
}

/** Starts `app` on 127.0.0.1, sends `requests` POSTs to `path` (each with a new key), and closes it. */
async function send(app: express.Express, path: string, requests: number): Promise<number[]> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
  try {
    const statuses: number[] = [];
    for (let i = 0; i < requests; i++) {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': `"${crypto.randomUUID()}"` },
        body: '{}',
      });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    return statuses;
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

const ok: express.RequestHandler = (_req, res) => void res.status(201).json({ ok: true });

describe('Express: a warning when recordIdempotencyError is not mounted', () => {
  it('warns once, naming the route, when no stack a route error reaches holds it', async () => {
    const { idempotency, warnings } = runner();
    const app = express();
    app.post('/orders', express.json(), createIdempotencyMiddleware({ idempotency }), ok);
    expect(await send(app, '/orders', 3)).toEqual([201, 201, 201]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/recordIdempotencyError is not mounted.*POST \/orders/);
  });

  const mounted: [string, string, (idempotent: express.RequestHandler) => express.Express][] = [
    [
      'after the routes',
      '/orders',
      (idempotent) => {
        const app = express();
        app.post('/orders', express.json(), idempotent, ok);
        app.use(recordIdempotencyError);
        return app;
      },
    ],
    [
      'on the route, after its handler',
      '/orders',
      (idempotent) => {
        const app = express();
        app.post('/orders', express.json(), idempotent, ok, recordIdempotencyError);
        return app;
      },
    ],
    [
      'in the router of the route',
      '/api/orders',
      (idempotent) => {
        const app = express();
        const router = express.Router();
        router.post('/orders', express.json(), idempotent, ok);
        router.use(recordIdempotencyError);
        app.use('/api', router);
        return app;
      },
    ],
    [
      'in the app a sub-app is mounted in',
      '/v1/orders',
      (idempotent) => {
        const parent = express();
        const child = express();
        child.post('/orders', express.json(), idempotent, ok);
        parent.use('/v1', child);
        parent.use(recordIdempotencyError);
        return parent;
      },
    ],
  ];

  it.each(mounted)('does not warn when it is mounted %s', async (_where, path, build) => {
    const { idempotency, warnings } = runner();
    const app = build(createIdempotencyMiddleware({ idempotency }));
    expect(await send(app, path, 2)).toEqual([201, 201]);
    expect(warnings).toEqual([]);
  });

  it('does not warn when the runner logs nothing (logger: false)', async () => {
    const idempotency = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      const app = express();
      app.post('/orders', express.json(), createIdempotencyMiddleware({ idempotency }), ok);
      expect(await send(app, '/orders', 1)).toEqual([201]);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });
});
