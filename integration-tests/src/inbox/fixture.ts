import { randomBytes } from 'node:crypto';
import {
  type ClaimReply,
  Idempotency,
  type IdempotencyOptions,
  RedisIdempotencyStore,
} from '@idempotent-consumer/core';
import type { SqlDialect } from '@idempotent-consumer/inbox-sql';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { DIALECTS, SqlDatabase } from '../../support/sql-database';

/** What an inbox suite gets: a fresh database schema, Redis, and runners on a private key prefix. */
export interface InboxFixture {
  readonly dialect: SqlDialect;
  readonly databaseUrl: string;
  readonly db: SqlDatabase;
  readonly redis: Redis;
  /** Prefix of every Redis key this suite writes (deleted after the suite). */
  readonly keyPrefix: string;
  /** A scope no other suite uses. */
  readonly scope: string;
  /** A runner on this suite's key prefix. */
  idempotency(options?: IdempotencyOptions): Idempotency;
  /** Claims `key` until it is held by this caller (waiting out a live lease), and returns the claim. */
  claimWhenFree(runner: Idempotency, key: string): Promise<ClaimReply>;
  /** Deletes this suite's Redis keys (only them). */
  wipeRedis(): Promise<void>;
}

/**
 * Declares `title` once per SQL dialect (`dialects`, default all): each runs only when Redis and that
 * database were discovered, else it is reported as skipped with the reason. The schema and the Redis keys
 * are removed afterwards. `body` gets the dialect too, so a test of one dialect's behaviour is declared
 * for that dialect only, rather than passing on the others without asserting anything.
 */
export function describeInbox(
  title: string,
  body: (fx: () => InboxFixture, dialect: SqlDialect) => void,
  options: { readonly dialects?: readonly SqlDialect[] } = {},
): void {
  for (const dialect of options.dialects ?? DIALECTS) {
    describeWithServices(['redis', dialect], `inbox on ${dialect}: ${title}`, (urls) => {
      let fixture: InboxFixture | undefined;
      const id = randomBytes(4).toString('hex');
      const keyPrefix = `inbox-it-${id}`;
      beforeAll(async () => {
        const db = await SqlDatabase.create(dialect, urls[dialect]);
        const redis = new Redis(urls.redis);
        const wipeRedis = async () => {
          const keys = await redis.keys(`${keyPrefix}*`);
          if (keys.length > 0) await redis.del(...keys);
        };
        fixture = {
          dialect,
          databaseUrl: urls[dialect],
          db,
          redis,
          keyPrefix,
          scope: `payments-${id}`,
          idempotency: (options = {}) =>
            new Idempotency({ store: new RedisIdempotencyStore({ redis }, { keyPrefix }) }, options),
          async claimWhenFree(runner, key) {
            for (;;) {
              const reply = await runner.claim({ scope: fixture!.scope, key });
              if (reply.outcome !== 'CONFLICT') return reply;
              await new Promise((r) => setTimeout(r, reply.remainingLeaseMs + 5));
            }
          },
          wipeRedis,
        };
      });
      afterAll(async () => {
        if (!fixture) return;
        await fixture.db.drop();
        await fixture.wipeRedis();
        await fixture.redis.quit();
      });
      body(() => fixture!, dialect);
    });
  }
}

/** A promise with its resolver, to hold a transaction open at a chosen point (or wait for one). */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open: () => void = () => {};
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
