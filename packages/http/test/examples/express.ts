// The Express example of packages/http/README.md, verbatim: typechecked with the package's tests.
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { createIdempotencyMiddleware, recordIdempotencyError } from '@idempotent-consumer/http/express';
import express from 'express';
import { Redis } from 'ioredis';

declare global {
  namespace Express {
    interface Request {
      /** Set by your authentication middleware from verified credentials (passport, a session). */
      user?: { accountId: string };
    }
  }
}
/** Your authentication middleware: answers 401, or sets `req.user` from verified credentials. */
declare const authenticate: express.RequestHandler;

const store = new RedisIdempotencyStore({ redis: new Redis() }, { keyPrefix: 'api' });
const idempotency = new Idempotency({ store }, { leaseMs: 30_000 });
const idempotent = createIdempotencyMiddleware(
  { idempotency },
  // The tenant is who authentication says the caller is, never a header or body field the client chooses.
  { required: true, tenant: (req) => req.user?.accountId },
);

const app = express();
app.post('/orders', authenticate, express.json(), idempotent, async (req, res) => {
  // req.idempotency: { key, scope, fencingToken, attempt, outcome, signal }
  const order = { id: crypto.randomUUID(), ...req.body, fencingToken: req.idempotency?.fencingToken };
  res.status(201).location(`/orders/${order.id}`).json(order);
});
// After the routes, before your error handlers: tells the middleware how a handler failed.
app.use(recordIdempotencyError);
app.listen(3000);
