import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import type Redis from 'ioredis';
import { type Contender, LEASE_MS, RETENTION_MS } from '../contender';
import type { CpuMeter } from '../cpu-meter';
import { median } from '../measure';
import { measureRounds, type Series } from '../throughput';
import { BenchClient } from './client';
import { bareExpress, expressIdempotencyPeer, oursExpress } from './express';
import { bareFastify, oursFastify } from './fastify';
import { bareHono, oursHono } from './hono';
import { bareNest, nodeIdempotencyPeer, oursNest } from './nest';
import { type HttpRaceResult, httpRace } from './race';
import type { BenchServer, Framework } from './server';

/** How much the HTTP section measures. */
export interface HttpBenchOptions {
  readonly rounds: number;
  readonly sequentialRequests: number;
  readonly concurrentRequests: number;
  readonly inFlight: number;
  readonly raceKeys: number;
  readonly raceCallers: number;
}

/** One framework's contenders: the bare route first (the reference), ours second, then the peers. */
export interface HttpGroup {
  readonly framework: Framework;
  readonly sequential: Series[];
  readonly concurrent: Series[];
  /**
   * Per contender, the median over rounds of (its sequential p50 − the bare route's p50 of the same round),
   * in µs: what the layer adds to one request.
   */
  readonly addedP50Us: Record<string, number>;
  readonly race: { name: string; race: HttpRaceResult }[];
}

/** The servers of one framework: bare first, then ours, then the peers. */
type Starters = readonly (() => Promise<BenchServer>)[];

/** A bench contender that sends each key to a server's `/orders` and expects 201. */
function asContender(server: BenchServer, client: BenchClient, keyPrefix: string): Contender {
  return {
    name: server.name,
    async process(key) {
      const answer = await client.post('/orders', `${keyPrefix}-${key}`);
      if (answer.status !== 201) throw new Error(`${server.name} answered ${answer.status}`);
      return answer;
    },
    close: async () => {},
  };
}

/**
 * The HTTP section: per framework, the bare route, ours and the peers with their Redis storage, each a
 * server on 127.0.0.1 driven by the same in-process client; rounds alternate the contenders (the order
 * rotated each round), and every ratio is taken against the bare route of the same round.
 */
export async function benchHttp(
  o: HttpBenchOptions,
  redis: Redis,
  redisUrl: string,
  prefix: string,
  meter: CpuMeter,
  only?: readonly Framework[],
): Promise<HttpGroup[]> {
  const runner = (name: string) =>
    new Idempotency(
      { store: new RedisIdempotencyStore({ redis }, { keyPrefix: `${prefix}:${name}` }) },
      { leaseMs: LEASE_MS, retentionMs: RETENTION_MS },
    );
  const groups: [Framework, Starters][] = [
    ['Fastify', [bareFastify, () => oursFastify(runner('fastify'))]],
    ['Express', [bareExpress, () => oursExpress(runner('express')), () => expressIdempotencyPeer(redisUrl)]],
    ['Hono', [bareHono, () => oursHono(runner('hono'))]],
    [
      'NestJS',
      [bareNest, () => oursNest(runner('nest')), () => nodeIdempotencyPeer(redisUrl, `${prefix}:node-idem`)],
    ],
  ];
  const results: HttpGroup[] = [];
  for (const [framework, starters] of groups) {
    if (only && !only.includes(framework)) continue;
    const servers: BenchServer[] = [];
    const clients: BenchClient[] = [];
    try {
      for (const start of starters) servers.push(await start());
      const contenders = servers.map((s, i) => {
        const client = new BenchClient(s.url, o.inFlight);
        clients.push(client);
        return asContender(s, client, `${prefix}:${framework}:${i}`);
      });
      await measureRounds(contenders, 1, 300, o.inFlight, 'warm');
      const sequential = await measureRounds(contenders, o.rounds, o.sequentialRequests, 1, 'seq', meter);
      const concurrent = await measureRounds(
        contenders,
        o.rounds,
        o.concurrentRequests,
        o.inFlight,
        'conc',
        meter,
      );
      const addedP50Us: Record<string, number> = {};
      for (const s of sequential.slice(1)) {
        addedP50Us[s.name] = median(s.rounds.map((r, i) => r.p50Us - sequential[0]!.rounds[i]!.p50Us));
      }
      const race: HttpGroup['race'] = [];
      for (const [i, server] of servers.entries()) {
        if (i === 0) continue;
        race.push({
          name: server.name,
          race: await httpRace(server, `${prefix}:race:${framework}:${i}`, o.raceKeys, o.raceCallers),
        });
      }
      const group = { framework, sequential, concurrent, addedP50Us, race };
      results.push(group);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
      await Promise.all(servers.map((s) => s.close()));
    }
  }
  return results;
}
