import {
  type HandlerContext,
  Idempotency,
  InvalidOptionError,
  MemoryIdempotencyStore,
  NonRetryableError,
} from '@idempotent-consumer/core';
import { idempotencyOf, withIdempotency } from '../src/fetch';

const runner = () =>
  new Idempotency({ store: new MemoryIdempotencyStore(), logger: false }, { leaseMs: 5_000 });

/** A POST of `body` (JSON text) with `key` to the handler's URL. */
const request = (key: string, body: string, query = '') =>
  new Request(`http://shop.example/api/orders${query}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body,
  });

describe('withIdempotency (fetch handlers) on the memory store', () => {
  it('runs the first request (the handler reads its body and claim), replays it, answers 422 to another body', async () => {
    const seen: { body: unknown; claim: HandlerContext | undefined }[] = [];
    const handler = withIdempotency(
      async (req: Request) => {
        seen.push({ body: await req.json(), claim: idempotencyOf(req) });
        return Response.json({ n: seen.length }, { status: 201, headers: { location: '/api/orders/1' } });
      },
      { idempotency: runner(), route: '/api/orders', conflictWaitMs: 0 },
    );
    const first = await handler(request('"k1"', '{"amount":1,"currency":"EUR"}'));
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ n: 1 });
    expect(seen[0]).toMatchObject({ body: { amount: 1, currency: 'EUR' }, claim: { attempt: 1 } });
    const again = await handler(request('"k1"', '{ "currency": "EUR", "amount": 1 }'));
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('location')).toBe('/api/orders/1');
    expect(await again.json()).toEqual({ n: 1 });
    const other = await handler(request('"k1"', '{"amount":2}'));
    expect(other.status).toBe(422);
    expect(other.headers.get('content-type')).toBe('application/problem+json');
    const query = await handler(request('"k1"', '{"amount":1,"currency":"EUR"}', '?dryRun=1'));
    expect(query.status).toBe(422);
    expect(seen).toHaveLength(1);
  });

  it('a handler that throws a NonRetryableError: the error reaches the platform, the key is FAILED', async () => {
    let runs = 0;
    const handler = withIdempotency(
      async () => {
        runs += 1;
        throw new NonRetryableError('declined for good');
      },
      { idempotency: runner(), route: '/api/orders' },
    );
    await expect(handler(request('"k2"', '{}'))).rejects.toThrow('declined for good');
    const retry = await handler(request('"k2"', '{}'));
    expect(retry.status).toBe(409);
    expect(await retry.json()).toMatchObject({
      type: 'urn:idempotent-consumer:problem:idempotency-key-failed',
    });
    expect(runs).toBe(1);
  });

  it('a request without a key on a route that does not require one runs untouched, extra arguments passed on', async () => {
    const handler = withIdempotency(
      async (req: Request, ctx: { params: { id: string } }) =>
        new Response(`${ctx.params.id} ${idempotencyOf(req) === undefined}`),
      { idempotency: runner(), route: '/api/orders/[id]' },
    );
    const res = await handler(new Request('http://shop.example/api/orders/7', { method: 'POST' }), {
      params: { id: '7' },
    });
    expect(await res.text()).toBe('7 true');
  });

  it('refuses to wrap without a runner or a route', () => {
    const handler = async () => new Response(null);
    expect(() => withIdempotency(handler, { idempotency: runner() } as never)).toThrow(InvalidOptionError);
    expect(() => withIdempotency(handler, { route: '/x' } as never)).toThrow(InvalidOptionError);
  });
});
