// The fetch example of packages/http/README.md, verbatim: typechecked with the package's tests.
// app/api/orders/route.ts, a Next.js route handler
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { idempotencyOf, withIdempotency } from '@idempotent-consumer/http/fetch';
import { Redis } from 'ioredis';

/** Your session lookup: the verified caller of a request, or undefined. */
declare function accountOf(request: Request): Promise<string | undefined>;

const store = new RedisIdempotencyStore({ redis: new Redis() }, { keyPrefix: 'api' });
const idempotency = new Idempotency({ store }, { leaseMs: 30_000 });

export const POST = withIdempotency(
  async (request: Request) => {
    // idempotencyOf(request): { key, scope, fencingToken, attempt, outcome, signal }
    const order = {
      id: crypto.randomUUID(),
      ...((await request.json()) as object),
      fencingToken: idempotencyOf(request)?.fencingToken,
    };
    return Response.json(order, { status: 201, headers: { location: `/api/orders/${order.id}` } });
  },
  // The tenant is who the session says the caller is, never a header or body field the client chooses.
  { idempotency, route: '/api/orders', required: true, tenant: accountOf },
);
