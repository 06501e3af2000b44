import {
  Idempotency,
  type IdempotencyLogger,
  InvalidKeyError,
  InvalidOptionError,
  MemoryIdempotencyStore,
  ReplicationTimeoutError,
  StoreUnavailableError,
  UnexpectedReplyError,
} from '../src';
import { FaultyStore } from './support/faulty-store';

/** A logger that records every call, per level. */
function recordingLogger() {
  const lines: [level: string, message: string, fields: Record<string, unknown> | undefined][] = [];
  const logger: IdempotencyLogger = {
    warn: (message, fields) => lines.push(['warn', message, fields]),
    error: (message, fields) => lines.push(['error', message, fields]),
    info: (message, fields) => lines.push(['info', message, fields]),
  };
  return { logger, lines };
}

function setup(options: { maxResultBytes?: number } = {}) {
  const clock = { ms: 1_700_000_000_000 };
  const store = new FaultyStore(new MemoryIdempotencyStore({ now: () => clock.ms }));
  const { logger, lines } = recordingLogger();
  const idempotency = new Idempotency(
    { store, logger },
    { leaseMs: 10_000, retentionMs: 60_000, ...options },
  );
  return { clock, store, idempotency, lines };
}

describe('Idempotency logger', () => {
  it('logs nothing for successful messages and duplicates', async () => {
    const { idempotency, lines } = setup();
    for (let i = 0; i < 50; i++) await idempotency.run({ scope: 's', key: `k-${i % 10}` }, () => i);
    expect(lines).toEqual([]);
  });

  it('warns once when the store becomes unavailable and once when it answers again', async () => {
    const { idempotency, store, lines } = setup();
    store.breakAlways('claim', () => new StoreUnavailableError('Redis did not answer within 2000 ms'));
    for (let i = 0; i < 5; i++) {
      await expect(idempotency.run({ scope: 's', key: `k-${i}` }, () => i)).rejects.toBeInstanceOf(
        StoreUnavailableError,
      );
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]![0]).toBe('warn');
    expect(lines[0]![1]).toMatch(
      /^idempotent-consumer: the idempotency store is unavailable \(claim: Redis did not answer/,
    );
    expect(lines[0]![2]).toMatchObject({ operation: 'claim', scope: 's', key: 'k-0' });
    store.heal();
    await idempotency.run({ scope: 's', key: 'after' }, () => 1);
    await idempotency.run({ scope: 's', key: 'after-2' }, () => 1);
    expect(lines).toHaveLength(2);
    expect(lines[1]![0]).toBe('info');
    expect(lines[1]![1]).toMatch(/answers again after \d+ ms \(5 failed calls\)/);
    expect(lines[1]![2]).toMatchObject({ failedCalls: 5 });
  });

  it('warns when a lease is lost and when a result is omitted', async () => {
    const { idempotency, store, clock, lines } = setup({ maxResultBytes: 10 });
    await idempotency.run({ scope: 's', key: 'big' }, () => 'x'.repeat(100));
    expect(lines.map(([level, message]) => [level, message])).toEqual([
      [
        'warn',
        expect.stringMatching(/result of key "big" of scope "s" is \d+ bytes, above maxResultBytes 10/),
      ],
    ]);
    await idempotency.run({ scope: 's', key: 'lost' }, async () => {
      clock.ms += 20_000;
      await store.inner.claim({ scope: 's', key: 'lost' }, { leaseMs: 10_000, retentionMs: 60_000 });
    });
    expect(lines[1]).toEqual([
      'warn',
      expect.stringMatching(/lease lost on key "lost" of scope "s" \(fencing token \d+, during write\)/),
      expect.objectContaining({ scope: 's', key: 'lost', fencingToken: expect.any(Number), during: 'write' }),
    ]);
  });

  it('reports an unexpected store reply as an error, every time', async () => {
    const { idempotency, store, lines } = setup();
    store.inject('claim', { kind: 'throw', error: () => new UnexpectedReplyError('Unexpected reply') }, 2);
    await expect(idempotency.run({ scope: 's', key: 'a' }, () => 1)).rejects.toThrow(UnexpectedReplyError);
    await expect(idempotency.run({ scope: 's', key: 'b' }, () => 1)).rejects.toThrow(UnexpectedReplyError);
    expect(lines.map(([level, message]) => [level, message])).toEqual([
      ['error', 'idempotent-consumer: claim failed: UnexpectedReplyError: Unexpected reply'],
      ['error', 'idempotent-consumer: claim failed: UnexpectedReplyError: Unexpected reply'],
    ]);
  });

  it('warns of a write its replicas did not acknowledge in time (waitForReplicas): documented and retryable, not an error', async () => {
    const { idempotency, store, lines } = setup();
    store.inject('claim', {
      kind: 'throw',
      error: () => new ReplicationTimeoutError('1 of 1 replicas did not acknowledge the write within 50 ms'),
    });
    await expect(idempotency.run({ scope: 's', key: 'r' }, () => 1)).rejects.toThrow(ReplicationTimeoutError);
    expect(lines.map(([level, message]) => [level, message])).toEqual([
      [
        'warn',
        'idempotent-consumer: claim failed: ReplicationTimeoutError: 1 of 1 replicas did not acknowledge the write within 50 ms',
      ],
    ]);
  });

  it("a scope or key the store refuses is the caller's error (like an InvalidOptionError): rejected with InvalidKeyError, neither logged nor a storeError", async () => {
    const { idempotency, lines } = setup();
    const storeErrors: unknown[] = [];
    idempotency.on('storeError', (e) => storeErrors.push(e));
    const refused = [
      { scope: 's', key: '' },
      { scope: 's', key: 'k'.repeat(600) },
      { scope: 's', key: `lone ${String.fromCharCode(0xd800)} surrogate` },
      { scope: 's'.repeat(600), key: 'k' },
    ];
    for (const request of refused) {
      await expect(idempotency.run(request, () => 1)).rejects.toBeInstanceOf(InvalidKeyError);
      await expect(idempotency.claim(request)).rejects.toBeInstanceOf(InvalidKeyError);
      await expect(idempotency.waitForOutcome(request)).rejects.toBeInstanceOf(InvalidKeyError);
    }
    await expect(
      idempotency.claimMany([
        { scope: 's', key: 'fine' },
        { scope: 's', key: '' },
      ]),
    ).rejects.toBeInstanceOf(InvalidKeyError);
    // An option out of range, the policy these follow: rejected, not logged.
    await expect(idempotency.run({ scope: 's', key: 'k' }, () => 1, { leaseMs: -1 })).rejects.toBeInstanceOf(
      InvalidOptionError,
    );
    // Before: one `error` line per refusal ("claim failed: InvalidKeyError: …"): any HTTP client could
    // write error lines at will with a key the store refuses.
    // (Levels and messages only: Jest cannot print a failed comparison of the error objects in `fields`.)
    expect(lines.map(([level, message]) => [level, message])).toEqual([]);
    expect(storeErrors.map((e) => (e as { operation: string }).operation)).toEqual([]);
  });

  it('defaults to console.warn, and logger: false silences it', async () => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const store = new FaultyStore(new MemoryIdempotencyStore());
      store.inject('claim', { kind: 'throw', error: () => new StoreUnavailableError('down') });
      await new Idempotency({ store }).run({ scope: 's', key: 'k' }, () => 1).catch(() => undefined);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0]![0]).toMatch(/the idempotency store is unavailable/);
      store.inject('claim', { kind: 'throw', error: () => new StoreUnavailableError('down') });
      await new Idempotency({ store, logger: false })
        .run({ scope: 's', key: 'k' }, () => 1)
        .catch(() => undefined);
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
    }
  });
});
