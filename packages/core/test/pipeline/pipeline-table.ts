import {
  Idempotency,
  type IdempotencyOptions,
  type IdempotencyStore,
  NonRetryableError,
  StoreUnavailableError,
} from '../../src';
import { AdapterLog, type MessageEnd, MessagePipeline, type MessagePort, StoreGate } from '../../src/kit';
import { FaultyStore } from '../support/faulty-store';

/** A message of the test broker: its key, payload, and what the handler does with it. */
export interface TestMessage {
  readonly id: string;
  readonly key?: string | (() => string);
  readonly body?: string;
  /** A redelivery's count of earlier runs without a claim. */
  readonly priorRuns?: number;
}

/** What one scenario saw. */
export interface Seen {
  readonly ends: MessageEnd<unknown>[];
  readonly events: [string, Record<string, unknown>][];
  readonly runs: string[];
  readonly marked: number;
}

/** A port that records what it is asked to carry out; `done` says whether the broker took it. */
class TestPort implements MessagePort<TestMessage> {
  readonly ends: MessageEnd<unknown>[] = [];
  readonly events: [string, Record<string, unknown>][] = [];
  marked = 0;
  constructor(private readonly accept: (end: MessageEnd<unknown>) => boolean) {}
  scopeOf(): string {
    return 'table';
  }
  keyOf(message: TestMessage): string | undefined {
    return typeof message.key === 'function' ? message.key() : message.key;
  }
  payloadOf(message: TestMessage) {
    return message.body;
  }
  handlerFields(message: TestMessage): object {
    return { message };
  }
  subject(message: TestMessage, fields: object): object {
    return { ...fields, source: message.id };
  }
  storeError(operation: string, error: unknown): object {
    return { operation, error };
  }
  warningWords() {
    return {
      where: 'on the table',
      keySource: 'the test key',
      advice: '',
      unacknowledged: 'it is left',
      deadLetter: (reason: string) => `dead-lettered (${reason})`,
    };
  }
  emit(name: string, payload: object): void {
    this.events.push([name, payload as Record<string, unknown>]);
  }
  deliveryId(message: TestMessage): string {
    return message.id;
  }
  priorRuns(message: TestMessage): number {
    return message.priorRuns ?? 0;
  }
  async carryOut(_message: TestMessage, end: MessageEnd<unknown>) {
    this.ends.push(end);
    if (end.decision.action === 'dead-letter') {
      await end.markDeadLettered();
      this.marked += 1;
    }
    end.span.end();
    return { done: this.accept(end), result: undefined };
  }
}

/** One row: the messages processed in order, and what must be seen. */
export interface Row {
  readonly name: string;
  readonly options?: IdempotencyOptions;
  readonly missingKey?: 'dead-letter' | 'process';
  /** Before the messages: breaks the store, holds a key, … */
  readonly before?: (store: FaultyStore, idempotency: Idempotency) => Promise<void> | void;
  readonly messages: readonly TestMessage[];
  readonly handler?: (message: TestMessage) => unknown;
  /** Whether the broker takes an end; taken by default. */
  readonly accept?: (end: MessageEnd<unknown>) => boolean;
  readonly expect: (seen: Seen) => void;
}

const ok = (message: TestMessage) => `done ${message.id}`;

/** The pipeline's behaviour, one row per path, broker-neutral. Run on any store. */
export const ROWS: readonly Row[] = [
  {
    name: 'a new key runs and acks as completed',
    messages: [{ id: 'm1', key: 'k1', body: 'a' }],
    expect: ({ ends, runs }) => {
      expect(runs).toEqual(['m1']);
      expect(ends.map((e) => [e.decision, e.subject.outcome])).toEqual([
        [{ action: 'ack', reason: 'completed' }, 'ACQUIRED'],
      ]);
    },
  },
  {
    name: 'a duplicate acks without running',
    messages: [
      { id: 'm1', key: 'k1', body: 'a' },
      { id: 'm2', key: 'k1', body: 'a' },
    ],
    expect: ({ ends, runs }) => {
      expect(runs).toEqual(['m1']);
      expect(ends[1]!.decision).toEqual({ action: 'ack', reason: 'duplicate' });
    },
  },
  {
    name: 'another payload under a used key is dead-lettered, never run',
    messages: [
      { id: 'm1', key: 'k1', body: 'a' },
      { id: 'm2', key: 'k1', body: 'b' },
    ],
    expect: ({ ends, runs }) => {
      expect(runs).toEqual(['m1']);
      expect(ends[1]!.decision).toMatchObject({ action: 'dead-letter', reason: 'payload-mismatch' });
    },
  },
  {
    name: 'a retryable error releases the record and retries after the backoff',
    handler: () => {
      throw new Error('boom');
    },
    messages: [{ id: 'm1', key: 'k1' }],
    expect: ({ ends }) => {
      expect(ends[0]!.decision).toMatchObject({ action: 'retry', reason: 'handler-error', attempt: 1 });
    },
  },
  {
    name: 'a non-retryable error fails the record, dead-letters it and marks it',
    handler: () => {
      throw new NonRetryableError('declined');
    },
    messages: [
      { id: 'm1', key: 'k1' },
      { id: 'm2', key: 'k1' },
    ],
    expect: ({ ends, runs, marked }) => {
      expect(runs).toEqual(['m1']);
      expect(ends[0]!.decision).toMatchObject({ action: 'dead-letter', reason: 'non-retryable' });
      expect(marked).toBe(1);
      // The redelivery finds the FAILED record marked: done without another copy.
      expect(ends[1]!.decision).toEqual({ action: 'ack', reason: 'dead-lettered-before' });
    },
  },
  {
    name: 'the last attempt fails the record as attempts-exhausted',
    options: { maxAttempts: 2 },
    handler: () => {
      throw new Error('boom');
    },
    messages: [
      { id: 'm1', key: 'k1' },
      { id: 'm2', key: 'k1' },
    ],
    expect: ({ ends, runs }) => {
      expect(runs).toEqual(['m1', 'm2']);
      expect(ends[1]!.decision).toMatchObject({ action: 'dead-letter', reason: 'attempts-exhausted' });
    },
  },
  {
    name: 'a key another worker holds is retried after its lease, capped, without running',
    options: { conflictWaitMs: 0 },
    before: async (_store, idempotency) => {
      await idempotency.claim({ scope: 'table', key: 'k1' });
    },
    messages: [{ id: 'm1', key: 'k1' }],
    expect: ({ ends, runs }) => {
      expect(runs).toEqual([]);
      expect(ends[0]!.decision).toMatchObject({ action: 'retry', reason: 'conflict', delayMs: 1000 });
    },
  },
  {
    name: 'a missing key is dead-lettered with a missingKey event',
    messages: [{ id: 'm1' }],
    expect: ({ ends, events, runs }) => {
      expect(runs).toEqual([]);
      expect(ends[0]!.decision).toMatchObject({ action: 'dead-letter', reason: 'missing-key' });
      expect(events.map(([name]) => name)).toEqual(['missingKey']);
    },
  },
  {
    name: 'missingKey process runs without a claim and acks it',
    missingKey: 'process',
    messages: [{ id: 'm1' }],
    expect: ({ ends, runs }) => {
      expect(runs).toEqual(['m1']);
      expect(ends[0]).toMatchObject({
        decision: { action: 'ack', reason: 'unprotected' },
        subject: { outcome: 'UNPROTECTED', attempt: 1 },
      });
    },
  },
  {
    name: "runs without a claim are bounded by maxAttempts, counting the broker's runs",
    missingKey: 'process',
    options: { maxAttempts: 3 },
    handler: () => {
      throw new Error('boom');
    },
    messages: [{ id: 'm1', priorRuns: 2 }],
    expect: ({ ends }) => {
      expect(ends[0]!.decision).toMatchObject({
        action: 'dead-letter',
        reason: 'attempts-exhausted',
        attempt: 3,
      });
    },
  },
  {
    name: 'a dead letter the broker could not take is sent again, not run again',
    missingKey: 'process',
    handler: () => {
      throw new NonRetryableError('declined');
    },
    accept: (end) => end.decision.action !== 'dead-letter' || end.subject.attempt === 0,
    messages: [{ id: 'm1' }, { id: 'm1' }],
    expect: ({ ends, runs }) => {
      expect(runs).toEqual(['m1']);
      expect(ends.map((e) => e.decision.action)).toEqual(['dead-letter', 'dead-letter']);
    },
  },
  {
    name: 'a key extractor that throws is dead-lettered as invalid-key with an event',
    messages: [
      {
        id: 'm1',
        key: () => {
          throw new Error('unparsable');
        },
      },
    ],
    expect: ({ ends, events }) => {
      expect(ends[0]!.decision).toMatchObject({ action: 'dead-letter', reason: 'invalid-key' });
      expect(events.map(([name]) => name)).toEqual(['invalidKey']);
    },
  },
  {
    name: 'a store that does not answer the claim sends the message back, nothing runs',
    before: (store) => {
      store.inject('claim', { kind: 'throw', error: () => new StoreUnavailableError('down') });
    },
    messages: [{ id: 'm1', key: 'k1' }],
    expect: ({ ends, runs, events }) => {
      expect(runs).toEqual([]);
      expect(ends[0]!.decision).toMatchObject({ action: 'leave', reason: 'store-unavailable' });
      expect(events.map(([name]) => name)).toEqual([]);
    },
  },
  {
    name: 'failing open, a store that does not answer runs the handler without a claim',
    options: { storeFailureMode: 'open' },
    before: (store) => {
      store.inject('claim', { kind: 'throw', error: () => new StoreUnavailableError('down') }, 2);
    },
    messages: [{ id: 'm1', key: 'k1' }],
    expect: ({ ends, runs }) => {
      expect(runs).toEqual(['m1']);
      expect(ends[0]).toMatchObject({
        decision: { action: 'ack', reason: 'unprotected' },
        subject: { outcome: 'UNPROTECTED' },
      });
    },
  },
];

/** Runs one row on a fresh store from `makeStore`. */
export async function runRow(row: Row, makeStore: () => IdempotencyStore): Promise<void> {
  const store = new FaultyStore(makeStore());
  const idempotency = new Idempotency(
    { store, logger: false },
    { leaseMs: 5_000, maxAttempts: 5, retentionMs: 60_000, ...row.options },
  );
  await row.before?.(store, idempotency);
  const port = new TestPort(row.accept ?? (() => true));
  const runs: string[] = [];
  const handler = row.handler ?? ok;
  const pipeline = new MessagePipeline<TestMessage, unknown>({
    idempotency,
    handler: ((context: { message: TestMessage }) => {
      runs.push(context.message.id);
      return handler(context.message);
    }) as never,
    port,
    gate: new StoreGate(store),
    log: AdapterLog.silent,
    telemetry: { start: () => NOOP },
    stopping: new AbortController().signal,
    options: {
      missingKey: row.missingKey ?? 'dead-letter',
      overrides: {},
      policy: {
        retryBackoff: { baseMs: 1000, jitter: 'none' },
        maxConflictDelayMs: 1000,
        maxAttempts: idempotency.options.maxAttempts,
        isRetryable: idempotency.options.isRetryable,
      },
    },
  });
  for (const message of row.messages) await pipeline.process(message, pipeline.prepare(message));
  row.expect({ ends: port.ends, events: port.events, runs, marked: port.marked });
}

const NOOP = {
  run: <R>(fn: () => R) => fn(),
  timeHandler: <R>(fn: () => R) => fn(),
  claiming: () => {},
  result: () => {},
  brokerAction: () => {},
  end: () => {},
};
