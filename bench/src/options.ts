import { Command, Option } from 'commander';

/** The sections of the bench, in the order they run. */
export const SECTIONS = ['core', 'peers', 'claimMany', 'adapters', 'memory', 'http'] as const;
export type Section = (typeof SECTIONS)[number];

/** How much the bench measures; `--quick` scales every count down to stay under a minute. */
export interface BenchOptions {
  readonly quick: boolean;
  readonly sections: readonly Section[];
  readonly out: string;
  /** Rounds per scenario (order rotated each round; ratios are medians over rounds). */
  readonly rounds: number;
  /** Rounds of the peers (they are slower). */
  readonly peerRounds: number;
  /** Messages per round at 50 in flight, and sequentially. */
  readonly concurrentMessages: number;
  readonly sequentialMessages: number;
  /** Messages per round for the peers (slower, so fewer). */
  readonly peerMessages: number;
  readonly inFlight: number;
  readonly raceKeys: number;
  readonly raceCallers: number;
  readonly adapterMessages: { rabbitmq: number; kafka: number; sqs: number; bullmq: number; nats: number };
  /** Measured passes per adapter, after one unreported warm-up pass of a fifth of the messages. */
  readonly adapterRounds: number;
  readonly memoryRecords: number;
  /** The HTTP section: rounds, requests per round (sequential, in flight), requests in flight. */
  readonly http: {
    readonly rounds: number;
    readonly sequentialRequests: number;
    readonly concurrentRequests: number;
    readonly inFlight: number;
    /** Only these frameworks (`--http-frameworks`); all when absent. */
    readonly frameworks?: readonly ('Express' | 'Fastify' | 'Hono' | 'NestJS')[];
  };
}

/** Parses `npm run bench -- [options]` (commander). */
export function parseOptions(argv: readonly string[]): BenchOptions {
  const program = new Command('bench')
    .description(
      'Measures idempotent-consumer against the bare scripts, peer libraries and bare broker clients',
    )
    .option('--quick', 'smaller counts (under a minute)', false)
    .addOption(
      new Option('--only <sections...>', 'run only these sections').choices(SECTIONS as unknown as string[]),
    )
    .option('--out <file>', 'where to write the JSON results', 'bench/results/latest.json')
    .option('--rounds <n>', 'rounds per scenario', (v) => Number.parseInt(v, 10))
    .addOption(
      new Option('--http-frameworks <names...>', 'the http section on these frameworks only').choices([
        'Express',
        'Fastify',
        'Hono',
        'NestJS',
      ]),
    )
    .option('--in-flight <n>', 'messages in flight in the concurrent runs', (v) => Number.parseInt(v, 10), 50)
    .parse(argv, { from: 'user' });
  const o = program.opts<{
    quick: boolean;
    only?: Section[];
    out: string;
    rounds?: number;
    inFlight: number;
    httpFrameworks?: ('Express' | 'Fastify' | 'Hono' | 'NestJS')[];
  }>();
  const q = o.quick;
  return {
    quick: q,
    sections: o.only ?? SECTIONS,
    out: o.out,
    // Many short rounds rather than a few long ones: on a shared machine the load changes within seconds,
    // and a ratio taken between neighbours in time (then the median over rounds) shrugs most of it off.
    rounds: o.rounds ?? (q ? 3 : 8),
    peerRounds: o.rounds ?? (q ? 2 : 5),
    concurrentMessages: q ? 1_500 : 4_000,
    sequentialMessages: q ? 300 : 800,
    // Peers' rounds are longer: at 2,500 messages a round of ours lasted about 50 ms, and what a round costs
    // whatever the contender's speed (filling and draining 50 in flight, a collection of what the previous
    // contender allocated) weighs most on the fastest: ours measured 49,000-50,000 msg/s in such rounds and
    // 54,000-57,000 in rounds of 10,000.
    peerMessages: q ? 600 : 10_000,
    inFlight: o.inFlight,
    raceKeys: q ? 50 : 200,
    raceCallers: 16,
    adapterMessages: q
      ? { rabbitmq: 1_000, kafka: 1_000, sqs: 300, bullmq: 1_000, nats: 1_000 }
      : { rabbitmq: 6_000, kafka: 6_000, sqs: 1_500, bullmq: 6_000, nats: 6_000 },
    adapterRounds: q ? 1 : 3,
    memoryRecords: q ? 10_000 : 100_000,
    http: {
      rounds: o.rounds ?? (q ? 2 : 5),
      sequentialRequests: q ? 300 : 1_000,
      concurrentRequests: q ? 600 : 2_000,
      inFlight: 32,
      ...(o.httpFrameworks ? { frameworks: o.httpFrameworks } : {}),
    },
  };
}
