// The Express example of packages/http/README.md, verbatim: typechecked with the package's tests.
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { createIdempotencyMiddleware, recordIdempotencyError } from '@idempotent-consumer/http/express';
import express from 'express';
import { Redis } from 'ioredis';

const store = new RedisIdempotencyStore({ redis: new Redis() }, { keyPrefix: 'api' });
const idempotency = new Idempotency({ store }, { leaseMs: 30_000 });
const idempotent = createIdempotencyMiddleware(
  { idempotency },
  { required: true, tenant: (req) => req.header('x-account-id') },
);

const app = express();
app.post('/orders', express.json(), idempotent, async (req, res) => {
  // req.idempotency: { key, scope, fencingToken, attempt, outcome, signal }
  const order = { id: crypto.randomUUID(), ...req.body, fencingToken: req.idempotency?.fencingToken };
  res.status(201).location(`/orders/${order.id}`).json(order);
});
// After the routes, before your error handlers: tells the middleware how a handler failed.
app.use(recordIdempotencyError);
app.listen(3000);
