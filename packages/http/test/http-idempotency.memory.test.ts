import {
  Idempotency,
  type IdempotencyOptions,
  type IdempotencyStore,
  MemoryIdempotencyStore,
  NonRetryableError,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import type { Admission, IncomingRequest } from '../src/admission';
import { HttpIdempotency, httpScope } from '../src/http-idempotency';
import { type HttpIdempotencyOptions, resolveHttpOptions } from '../src/options';

type Req = { tenant?: string };

function setup(
  options: HttpIdempotencyOptions<Req> = {},
  runner: IdempotencyOptions = {},
  store?: IdempotencyStore,
) {
  const idempotency = new Idempotency(
    { store: store ?? new MemoryIdempotencyStore() },
    { leaseMs: 5_000, ...runner },
  );
  const http = new HttpIdempotency<Req>(
    idempotency,
    resolveHttpOptions<Req>({ tenant: (r) => r.tenant, conflictWaitMs: 0, ...options }),
  );
  const request = (over: Partial<IncomingRequest<Req>> & { key?: string } = {}): IncomingRequest<Req> => ({
    request: {},
    method: 'POST',
    route: '/orders',
    target: '/orders',
    headers: over.key === undefined ? {} : { 'idempotency-key': over.key },
    body: { amount: 1 },
    ...over,
  });
  return { idempotency, http, request };
}

const problemType = (a: Admission) =>
  a.kind === 'answer' ? (JSON.parse(a.answer.body.toString()) as { type: string }).type : a.kind;

async function complete(a: Admission, status = 201, body = '{"id":1}') {
  if (a.kind !== 'run') throw new Error(`expected a run, got ${a.kind}`);
  return a.claimed.finish({
    status,
    headers: { 'content-type': 'application/json', 'x-internal': 'no' },
    body: Buffer.from(body),
    bytes: Buffer.byteLength(body),
  });
}

describe('HttpIdempotency on the memory store', () => {
  it('runs the first request, replays its response with the marker, and answers 422 to another payload', async () => {
    const { http, request } = setup();
    const first = await http.admit(request({ key: '"k1"' }));
    expect(first.kind).toBe('run');
    if (first.kind === 'run')
      expect(first.claimed.context).toMatchObject({ attempt: 1, outcome: 'ACQUIRED' });
    expect(await complete(first)).toBeUndefined();
    const replay = await http.admit(request({ key: '"k1"', body: { amount: 1 } }));
    expect(replay).toEqual({
      kind: 'answer',
      answer: {
        status: 201,
        headers: { 'content-type': 'application/json', 'idempotent-replayed': 'true' },
        body: Buffer.from('{"id":1}'),
      },
    });
    const other = await http.admit(request({ key: '"k1"', body: { amount: 2 } }));
    expect(problemType(other)).toBe('urn:idempotent-consumer:problem:idempotency-key-reused');
  });

  it('passes uncovered methods and routes, and requests without a key unless required', async () => {
    const { http, request } = setup({ routes: ['/orders'] });
    expect(await http.admit(request({ method: 'GET', key: 'k' }))).toEqual({ kind: 'pass' });
    expect(await http.admit(request({ route: '/other', key: 'k' }))).toEqual({ kind: 'pass' });
    expect(await http.admit(request())).toEqual({ kind: 'pass' });
    expect(problemType(await http.admit(request({ routeConfig: { required: true } })))).toBe(
      'urn:idempotent-consumer:problem:missing-idempotency-key',
    );
    // A route setting covers the request whatever methods and routes say.
    expect((await http.admit(request({ route: '/other', key: 'k', routeConfig: {} }))).kind).toBe('run');
  });

  it('scopes by method, route template and tenant', async () => {
    const { http, request } = setup({ methods: ['POST', 'PUT'] });
    const runs = [
      request({ key: 'same' }),
      request({ key: 'same', method: 'PUT' }),
      request({ key: 'same', route: '/orders/:id' }),
      request({ key: 'same', request: { tenant: 'a' } }),
      request({ key: 'same', request: { tenant: 'b' } }),
    ];
    for (const r of runs) {
      const a = await http.admit(r);
      expect(a.kind).toBe('run');
      await complete(a);
    }
    expect(httpScope('POST', '/orders', 'a')).toBe('["POST","/orders","a"]');
    expect(httpScope('POST', '/orders', undefined)).not.toBe(httpScope('POST', '/orders', ''));
  });

  it('answers 409 with Retry-After from the remaining lease while the first runs', async () => {
    const { http, request } = setup();
    const first = await http.admit(request({ key: 'busy' }));
    const second = await http.admit(request({ key: 'busy' }));
    expect(problemType(second)).toBe('urn:idempotent-consumer:problem:request-in-progress');
    if (second.kind === 'answer') expect(second.answer.headers['retry-after']).toBe('5');
    await complete(first);
  });

  it('waits for the holder within conflictWaitMs and replays its response', async () => {
    const { http, request } = setup({ conflictWaitMs: 10_000 });
    const first = await http.admit(request({ key: 'wait' }));
    const second = http.admit(request({ key: 'wait' }));
    await complete(first, 201, '{"waited":true}');
    const a = await second;
    expect(a.kind === 'answer' && a.answer.body.toString()).toBe('{"waited":true}');
  });

  it('releases the key on 5xx (a retry runs as attempt 2) and records FAILED when attempts run out', async () => {
    const { http, request } = setup({}, { maxAttempts: 2 });
    await complete(await http.admit(request({ key: 'flaky' })), 503);
    const retry = await http.admit(request({ key: 'flaky' }));
    if (retry.kind === 'run') expect(retry.claimed.context.attempt).toBe(2);
    await complete(retry, 500);
    expect(problemType(await http.admit(request({ key: 'flaky' })))).toBe(
      'urn:idempotent-consumer:problem:idempotency-key-failed',
    );
  });

  it('stores a 4xx', async () => {
    const { http, request } = setup();
    await complete(await http.admit(request({ key: 'bad' })), 400, '{"error":"bad"}');
    const again = await http.admit(request({ key: 'bad' }));
    expect(again.kind === 'answer' && again.answer.status).toBe(400);
  });

  it("a body above maxResponseBytes: 'fail' replaces it with a 500 problem, 'pass-through' keeps it unstored", async () => {
    const notStored: string[] = [];
    const failing = setup({ maxResponseBytes: 4 });
    const replaced = await complete(await failing.http.admit(failing.request({ key: 'big' })), 200, '123456');
    expect(replaced?.status).toBe(500);
    expect(problemType({ kind: 'answer', answer: replaced! })).toBe(
      'urn:idempotent-consumer:problem:response-too-large',
    );

    const passing = setup({
      maxResponseBytes: 4,
      onResponseTooLarge: 'pass-through',
      onResponseNotStored: (i) => notStored.push(i.key),
    });
    expect(
      await complete(await passing.http.admit(passing.request({ key: 'big' })), 200, '123456'),
    ).toBeUndefined();
    expect(problemType(await passing.http.admit(passing.request({ key: 'big' })))).toBe(
      'urn:idempotent-consumer:problem:response-not-stored',
    );
    expect(notStored).toEqual(['big']);
  });

  it('the request target is part of the payload unless fingerprintTarget is off', async () => {
    const strict = setup();
    await complete(await strict.http.admit(strict.request({ key: 'k', target: '/payouts?dryRun=true' })));
    expect(problemType(await strict.http.admit(strict.request({ key: 'k', target: '/payouts' })))).toBe(
      'urn:idempotent-consumer:problem:idempotency-key-reused',
    );
    const loose = setup({ fingerprintTarget: false });
    await complete(await loose.http.admit(loose.request({ key: 'k', target: '/payouts?dryRun=true' })));
    const replayed = await loose.http.admit(loose.request({ key: 'k', target: '/payouts' }));
    expect(replayed.kind === 'answer' && replayed.answer.status).toBe(201);
  });

  it("a response the runner refuses to store (its onResultTooLarge: 'fail') is answered 500 response-too-large, as the retries are told it failed, never 201", async () => {
    const notStored: string[] = [];
    const { http, request } = setup(
      { onResponseNotStored: (i) => notStored.push(i.key) },
      { maxResultBytes: 64, onResultTooLarge: 'fail' },
    );
    const body = JSON.stringify({ receipt: 'r'.repeat(200) }); // within maxResponseBytes, above maxResultBytes
    const first = await complete(await http.admit(request({ key: 'k' })), 201, body);
    // Before: undefined (the handler's 201 sent) while the record was FAILED.
    expect(first?.status).toBe(500);
    expect(problemType({ kind: 'answer', answer: first! })).toBe(
      'urn:idempotent-consumer:problem:response-too-large',
    );
    expect(notStored).toEqual(['k']);
    expect(problemType(await http.admit(request({ key: 'k' })))).toBe(
      'urn:idempotent-consumer:problem:idempotency-key-failed',
    );
  });

  it("a response the runner leaves out of the record (its onResultTooLarge: 'omit', the default) is sent, reported to onResponseNotStored, and retries get 409 response-not-stored", async () => {
    const notStored: unknown[] = [];
    const { http, request } = setup(
      { onResponseNotStored: (i) => notStored.push(i) },
      { maxResultBytes: 64 },
    );
    const body = JSON.stringify({ receipt: 'r'.repeat(200) }); // within maxResponseBytes, above maxResultBytes
    expect(await complete(await http.admit(request({ key: 'k' })), 201, body)).toBeUndefined();
    // Before: not called (completed without the response, silently).
    expect(notStored).toEqual([
      {
        scope: httpScope('POST', '/orders', undefined),
        key: 'k',
        status: 201,
        bytes: Buffer.byteLength(body),
      },
    ]);
    expect(problemType(await http.admit(request({ key: 'k' })))).toBe(
      'urn:idempotent-consumer:problem:response-not-stored',
    );
    expect(notStored).toHaveLength(1);
  });

  it('fails closed with 503 and Retry-After when the store does not answer; fails open by the runner option', async () => {
    const down = new MemoryIdempotencyStore();
    down.claim = () => Promise.reject(new StoreUnavailableError('down'));
    const closed = setup({ storeUnavailableRetryAfterMs: 3000 }, {}, down);
    const a = await closed.http.admit(closed.request({ key: 'x' }));
    expect(problemType(a)).toBe('urn:idempotent-consumer:problem:store-unavailable');
    if (a.kind === 'answer') expect(a.answer).toMatchObject({ status: 503, headers: { 'retry-after': '3' } });

    const open = setup({}, { storeFailureMode: 'open' }, down);
    const b = await open.http.admit(open.request({ key: 'x' }));
    expect(b.kind === 'run' && b.claimed.context).toMatchObject({ outcome: 'UNPROTECTED', fencingToken: 0 });
    expect(await complete(b)).toBeUndefined();
  });

  it('a scope the store refuses is a 500 (server-built); a key it refuses is a 400 (the client’s)', async () => {
    const store = new MemoryIdempotencyStore({ maxKeyBytes: 40 });
    const { http, request } = setup({}, {}, store);
    const refused = async (over: Parameters<typeof request>[0]) => {
      const a = await http.admit(request(over));
      return a.kind === 'answer' ? { status: a.answer.status, type: problemType(a) } : a.kind;
    };
    const scope = { status: 500, type: 'urn:idempotent-consumer:problem:scope-refused' };
    const key = { status: 400, type: 'urn:idempotent-consumer:problem:invalid-idempotency-key' };
    expect(await refused({ key: 'k', request: { tenant: 't'.repeat(30) } })).toEqual(scope);
    // Both too long: the key is longer than the scope, so it is too long for the store either way.
    expect(await refused({ key: 'k'.repeat(60), request: { tenant: 't'.repeat(30) } })).toEqual(key);
    expect(await refused({ key: 'k'.repeat(41) })).toEqual(key);
    expect(await refused({ key: 'k'.repeat(40) })).toBe('run');
  });

  it('records FAILED at once when the framework reports a non-retryable error with the 500', async () => {
    const { http, request } = setup();
    const a = await http.admit(request({ key: 'declined' }));
    if (a.kind !== 'run') throw new Error('expected a run');
    await a.claimed.finish({
      status: 500,
      headers: {},
      body: Buffer.alloc(0),
      bytes: 0,
      error: new NonRetryableError('declined'),
    });
    expect(problemType(await http.admit(request({ key: 'declined' })))).toBe(
      'urn:idempotent-consumer:problem:idempotency-key-failed',
    );
  });

  it('answers 415 to a covered request with a key whose body was not parsed, and passes one without a key', async () => {
    const { http, request } = setup();
    const unparsed = { body: undefined, unparsedBody: true, headers: { 'content-type': 'text/plain' } };
    const a = await http.admit(
      request({ ...unparsed, headers: { ...unparsed.headers, 'idempotency-key': 'k' } }),
    );
    expect(problemType(a)).toBe('urn:idempotent-consumer:problem:unsupported-media-type');
    expect(a.kind === 'answer' && a.answer.status).toBe(415);
    expect(await http.admit(request(unparsed))).toEqual({ kind: 'pass' });
  });

  it('extends the lease while the handler runs: past the first lease a duplicate still meets CONFLICT', async () => {
    const store = new MemoryIdempotencyStore();
    const { http, request } = setup({}, { leaseMs: 300, heartbeatIntervalMs: 50 }, store);
    const a = await http.admit(request({ key: 'long' }));
    if (a.kind !== 'run') throw new Error('expected a run');
    const id = { scope: a.claimed.context.scope, key: 'long' };
    const firstLease = (await store.get(id))!.leaseExpiresAtMs!;
    // Wait for heartbeats to push the lease past its first end, then past that end on the clock.
    for (;;) {
      const record = await store.get(id);
      if (record!.leaseExpiresAtMs! > firstLease + 300 && Date.now() > firstLease) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(problemType(await http.admit(request({ key: 'long' })))).toBe(
      'urn:idempotent-consumer:problem:request-in-progress',
    );
    await complete(a);
  });
});
