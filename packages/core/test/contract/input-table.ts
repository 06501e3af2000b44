/**
 * Every kind of bad input `Idempotency.run` can meet, one row each, run on every store (the memory store
 * in the unit project, real Redis in the integration project): a payload that cannot be fingerprinted, a
 * fingerprint that is not one, a handler that is not a function, and handlers that throw values that are
 * not errors. `run` never rejects with anything but the documented typed errors, and no row leaves a key
 * IN_PROGRESS.
 *
 * Only types come from the core here, so the module can be imported by both Jest projects.
 */
import type { Idempotency, IdempotencyStore, RecordId, RunRequest } from '@idempotent-consumer/core';

/** Builds a runner on the store under test with the given `maxAttempts`. */
export type MakeRunner = (maxAttempts: number) => Idempotency;

/** One row: a request and a handler, and what must follow. */
interface InputRow {
  readonly name: string;
  readonly request?: (id: RecordId) => unknown;
  readonly handler?: unknown;
  /** `run` rejects with this code and the store holds no record for the key. */
  readonly rejects?: string;
  /** Otherwise `run` resolves; with maxAttempts 2 the record is RELEASED, with 1 FAILED. */
  readonly throws?: () => unknown;
}

const circular = () => {
  const o: Record<string, unknown> = { a: 1 };
  o.self = o;
  return o;
};

const revokedProxy = () => {
  const { proxy, revoke } = Proxy.revocable(new Error('gone'), {});
  revoke();
  return proxy;
};

const throwingGetters = () =>
  Object.defineProperties(
    {},
    {
      name: {
        get: () => {
          throw new Error('name getter');
        },
      },
      message: {
        get: () => {
          throw new Error('message getter');
        },
      },
      retryable: {
        get: () => {
          throw new Error('retryable getter');
        },
      },
    },
  );

/** The table. */
export const INPUT_ROWS: InputRow[] = [
  {
    name: 'a payload with a bigint',
    request: (id) => ({ ...id, payload: { amount: 10n } }),
    rejects: 'INVALID_PAYLOAD',
  },
  {
    name: 'a circular payload',
    request: (id) => ({ ...id, payload: circular() }),
    rejects: 'INVALID_PAYLOAD',
  },
  {
    name: 'a payload with NaN',
    request: (id) => ({ ...id, payload: { amount: Number.NaN } }),
    rejects: 'INVALID_PAYLOAD',
  },
  {
    name: 'a revoked Proxy as the payload',
    request: (id) => ({ ...id, payload: revokedProxy() }),
    rejects: 'INVALID_PAYLOAD',
  },
  {
    name: 'a payload with a function',
    request: (id) => ({ ...id, payload: { f: () => 1 } }),
    rejects: 'INVALID_PAYLOAD',
  },
  {
    name: 'a fingerprint of 100,000 characters',
    request: (id) => ({ ...id, fingerprint: 'a'.repeat(100_000) }),
    rejects: 'INVALID_PAYLOAD',
  },
  {
    name: 'a fingerprint that is not hex',
    request: (id) => ({ ...id, fingerprint: 'z'.repeat(64) }),
    rejects: 'INVALID_PAYLOAD',
  },
  { name: "a handler 'not a function'", handler: 'not a function', rejects: 'INVALID_OPTION' },
  { name: 'a null handler', handler: null, rejects: 'INVALID_OPTION' },
  { name: 'a request that is null', request: () => null, rejects: 'INVALID_IDEMPOTENCY_KEY' },
  { name: 'a handler that throws null', throws: () => null },
  { name: 'a handler that throws undefined', throws: () => undefined },
  { name: 'a handler that throws a string', throws: () => 'just a string' },
  { name: 'a handler that throws a symbol', throws: () => Symbol('oops') },
  {
    name: 'a handler that throws { message: Object.create(null) }',
    throws: () => ({ message: Object.create(null) }),
  },
  { name: 'a handler that throws an object whose getters throw', throws: throwingGetters },
  { name: 'a handler that throws a revoked Proxy', throws: revokedProxy },
  {
    name: 'a handler that returns a thenable whose then getter throws',
    handler: () =>
      Object.defineProperty({}, 'then', {
        get: () => {
          throw new Error('then getter');
        },
      }),
  },
];

/** Declares the table as Jest tests on the runners `make` builds. */
export function describeInputTable(
  title: string,
  make: () => { runner: MakeRunner; store: IdempotencyStore },
  scope: () => string,
): void {
  describe(title, () => {
    for (const [maxAttempts, state, status] of [
      [2, 'RELEASED', 'released'],
      [1, 'FAILED', 'failed'],
    ] as const) {
      it.each(INPUT_ROWS.map((row, i) => [row.name, i] as const))(
        `%s (maxAttempts ${maxAttempts})`,
        async (_, i) => {
          const row = INPUT_ROWS[i]!;
          const { runner, store } = make();
          const id = { scope: scope(), key: `input-${maxAttempts}-${i}` };
          const request = (row.request ? row.request(id) : id) as RunRequest;
          const ran = jest.fn();
          const handler =
            row.handler !== undefined
              ? row.handler
              : () => {
                  ran();
                  throw row.throws?.();
                };
          const outcome = await runner(maxAttempts)
            .run(request, handler as () => unknown)
            .then(
              (result) => ({ result }),
              (error: unknown) => ({ error }),
            );
          if (row.rejects) {
            expect(outcome).toMatchObject({ error: { code: row.rejects, retryable: false } });
            expect(ran).not.toHaveBeenCalled();
            expect(await store.get(id)).toBeNull();
            return;
          }
          expect(outcome).not.toHaveProperty('error');
          const result = (outcome as { result: Record<string, unknown> }).result;
          expect(result).toMatchObject({ outcome: 'ACQUIRED', status, attempt: 1 });
          const record = await store.get(id);
          expect(record).toMatchObject({ state });
          if (state === 'FAILED') expect(typeof record!.error).toBe('string');
        },
      );
    }
  });
}
