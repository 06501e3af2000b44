/**
 * `@idempotent-consumer/rabbitmq/topology`: the names and arguments of the queues and exchanges a consumer
 * relies on (README, "Topology"), for users who declare them themselves (`topology: 'check'`) or delete them.
 * @packageDocumentation
 */

/** One delay tier: a queue whose messages expire after `delayMs` and dead-letter back to the work queue. */
export interface DelayTier {
  readonly delayMs: number;
  readonly queue: string;
}

/**
 * The RabbitMQ resources one consumer relies on (README, "Topology"):
 * - `queue`: the work queue (yours; checked, never declared);
 * - `delayTiers`: durable queues with `x-message-ttl = delayMs`, `x-dead-letter-exchange = ''` (the
 *   default exchange) and `x-dead-letter-routing-key = queue`, and no consumer: a message published to a
 *   tier waits `delayMs` and comes back to the work queue;
 * - `deadLetterExchange`: a durable `direct` exchange; dead-lettered messages are published to it with the
 *   work queue's name as routing key;
 * - `deadLetterQueue`: a durable queue bound to it with that key (or `false`: you bind your own).
 */
export interface ConsumerTopology {
  readonly queue: string;
  readonly delayTiers: readonly DelayTier[];
  readonly deadLetterExchange: string;
  readonly deadLetterRoutingKey: string;
  readonly deadLetterQueue: string | false;
}

/** The default delay tiers, in milliseconds. */
export const DEFAULT_DELAY_TIERS_MS: readonly number[] = [1000, 5000, 30_000, 120_000];

/** The options that name a consumer's resources (the same fields and defaults as the consumer's options). */
export interface TopologyOptions {
  readonly queue: string;
  /** @defaultValue `[1000, 5000, 30000, 120000]` */
  readonly delayTiersMs?: readonly number[];
  /** @defaultValue `<queue>.delay` */
  readonly delayQueuePrefix?: string;
  /** @defaultValue `<queue>.dlx` */
  readonly deadLetterExchange?: string;
  /** @defaultValue `<queue>.dlq` */
  readonly deadLetterQueue?: string | false;
}

/**
 * The names of every resource of a consumer with these options, defaults applied (the same as the
 * consumer's `topology`): for declaring them yourself with `topology: 'check'`, or deleting them.
 */
export function consumerTopology(options: TopologyOptions): ConsumerTopology {
  const { queue } = options;
  const prefix = options.delayQueuePrefix ?? `${queue}.delay`;
  const tiers = [...(options.delayTiersMs ?? DEFAULT_DELAY_TIERS_MS)].sort((a, b) => a - b);
  return {
    queue,
    delayTiers: tiers.map((delayMs) => ({ delayMs, queue: `${prefix}.${delayMs}ms` })),
    deadLetterExchange: options.deadLetterExchange ?? `${queue}.dlx`,
    deadLetterRoutingKey: queue,
    deadLetterQueue: options.deadLetterQueue ?? `${queue}.dlq`,
  };
}

/**
 * The arguments of a delay-tier queue (the same on every declaration, so redeclaring is idempotent):
 * declare a tier with them when you manage the topology yourself (`topology: 'check'`).
 */
export function delayTierArguments(tier: DelayTier, workQueue: string): Record<string, unknown> {
  return {
    'x-message-ttl': tier.delayMs,
    'x-dead-letter-exchange': '',
    'x-dead-letter-routing-key': workQueue,
  };
}
