import type { Idempotency } from '@idempotent-consumer/core';
import type { Redis } from 'ioredis';

/**
 * The contract between the demo's orchestrator (cli.ts, consumer-process.ts) and one broker module
 * (`brokers/rabbitmq.ts`, `brokers/kafka.ts`, `brokers/sqs.ts`, `brokers/bullmq.ts`, `brokers/nats.ts`). The
 * orchestrator owns the scenario, the ledger and the table; a broker module only moves payment messages.
 */

/** One payment message. Duplicates are the same object published again (same `idempotencyKey`). */
export interface PaymentMessage {
  readonly paymentId: string;
  readonly amountCents: number;
  /** Idempotency key the producer sets (header / message id / message attribute, as the adapter reads it). */
  readonly idempotencyKey: string;
}

/** `sdk`: consumers use idempotent-consumer. `naive`: the same consumers without it (the baseline). */
export type DemoMode = 'sdk' | 'naive';

/** Producer side of a broker, used by the orchestrator process. */
export interface DemoBroker {
  /** `rabbitmq`, `kafka`, `sqs`, `bullmq` or `nats`. */
  readonly name: string;
  /**
   * Checks the broker is reachable (or starts an embedded one). Resolves `null` when ready, or a one-line
   * explanation of which service is missing and the command that starts it.
   */
  preflight(): Promise<string | null>;
  /**
   * Creates the queues / topics of one run and returns the settings the consumer processes need
   * (passed to {@link DemoConsumerModule.startConsumer} as `config`).
   */
  setup(runId: string, mode: DemoMode): Promise<Record<string, string>>;
  /** Publishes messages in order (duplicates included). */
  publish(messages: readonly PaymentMessage[]): Promise<void>;
  /**
   * Deletes what `setup` created for that run. The orchestrator runs `setup`/`publish`/`teardown` twice on
   * the same object (the `sdk` run, then the `naive` baseline), so connections stay open until `close`.
   */
  teardown(): Promise<void>;
  /** Closes connections and stops anything `preflight` started (an embedded emulator or mock broker). */
  close(): Promise<void>;
}

/** Counters a consumer process reports; the broker module increments `deliveries` and `deadLettered`. */
export interface DemoCounters {
  /** Messages the broker handed to the consumer, redeliveries included. */
  deliveries: number;
  /** Calls of the handler (`charge`), whatever their end: charged, gateway timeout or killed. */
  handlerRuns: number;
  /** Handler runs that ended in a (simulated) gateway timeout before anything was charged. */
  gatewayTimeouts: number;
  /** Deliveries not run because the key was already completed (SDK only). */
  duplicatesSkipped: number;
  /** Deliveries not run because another consumer held the key's lease (SDK only). */
  conflicts: number;
  /** Records released after a handler error, for a later retry (SDK only). */
  retries: number;
  deadLettered: number;
}

/** What a broker module's consumer gets from the consumer process. */
export interface DemoConsumerContext {
  readonly config: Record<string, string>;
  readonly mode: DemoMode;
  /** Only in `sdk` mode: the runner the adapter must use (its events feed the counters). */
  readonly idempotency: Idempotency | undefined;
  readonly redis: Redis;
  readonly counters: DemoCounters;
  /**
   * The side effect: charge the payment (records one charge in the ledger). Call it from the handler,
   * once per handler run; pass the fencing token in `sdk` mode.
   */
  charge(message: PaymentMessage, fencingToken?: number): Promise<void>;
}

/** Consumer side of a broker, loaded in each consumer process. */
export interface DemoConsumerModule {
  /** Starts consuming; resolves once subscribed. `stop` closes everything. */
  startConsumer(context: DemoConsumerContext): Promise<{ stop(): Promise<void> }>;
}
