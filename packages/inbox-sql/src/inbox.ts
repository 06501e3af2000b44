import {
  type HandlerContext,
  InvalidKeyError,
  InvalidOptionError,
  LeaseLostError,
  MissingKeyError,
  NonRetryableError,
} from '@idempotent-consumer/core';
import { DEFAULT_INBOX_TABLE, type InboxStatements, inboxStatements, type SqlDialect } from './dialect';
import { TransactionEndedError, TransactionLostError } from './errors';
import type { RunInTransaction, SqlClient, SqlResult } from './sql-client';
import { transactionLossOf } from './transaction-loss';

/**
 * What the inbox needs from a handler's context. The core's `HandlerContext` and every adapter's fit. `key`
 * may be `undefined` only so that contexts of deliveries run without a key are accepted, such as RabbitMQ's
 * `missingKey: 'process'`. The inbox then throws `MissingKeyError`.
 */
export type InboxContext = Pick<HandlerContext, 'scope' | 'fencingToken'> & {
  readonly key: string | undefined;
  /** When given and aborted because the claim was lost, the transaction rolls back before it commits. */
  readonly signal?: AbortSignal;
};

/** How a {@link TransactionalInbox.run} ended. */
export type InboxRunResult<T> =
  | {
      /** The side effect and the inbox row committed together, in this call. */
      readonly status: 'committed';
      readonly result: T;
    }
  | {
      /**
       * The inbox row was already committed by an earlier run of this key, such as a crashed or lease-lost
       * worker or a redelivery after the Redis record was lost. The side effect was not run again.
       */
      readonly status: 'duplicate';
      /** The value the committing run's side effect returned, through JSON, or `undefined` if none. */
      readonly result: T | undefined;
      /** The fencing token of the run that committed. */
      readonly fencingToken: number;
      /**
       * When it committed, in whole ms since the epoch on the database's clock. It is the time of the commit
       * statement, the transaction's last, a moment before its `COMMIT`.
       */
      readonly committedAtMs: number;
    };

/** The state of one key's inbox row. */
export interface InboxRow {
  readonly fencingToken: number;
  /** `undefined` while uncommitted, that is, fenced by a claim whose transaction has not committed. */
  readonly committedAtMs: number | undefined;
  /** The stored result as JSON text, `undefined` when none. */
  readonly result: string | undefined;
}

/** Options of {@link TransactionalInbox}. */
export interface TransactionalInboxOptions {
  /** `postgres` for PostgreSQL 12+, or `mysql` for MySQL 8 and MariaDB 10.5+. */
  readonly dialect: SqlDialect;
  /**
   * Runs statements outside any transaction, in autocommit: the fence before the transaction and the reads
   * after a refused commit. Usually the pool, as `pgClient(pool)` or `mysqlClient(pool)`.
   */
  readonly client: SqlClient;
  /** Runs a body in one transaction: `pgTransaction(pool)`, `mysqlTransaction(pool)`, or the ORM's. */
  readonly transaction: RunInTransaction;
  /**
   * Table name, optionally `schema.table`. Default `idempotency_inbox`. The table's own name is at most 52
   * characters, so that its expiry index `<table>_expires_at` fits the databases' limit of 63.
   */
  readonly table?: string;
  /**
   * How long a row is kept after its last write, in milliseconds, before
   * {@link TransactionalInbox.deleteExpired} may delete it. It must outlast every redelivery of the key and
   * the Redis record's retention, because a redelivery after the row is gone runs the side effect again.
   * Default 7 days, 604 800 000.
   */
  readonly retentionMs?: number;
}

/** Default {@link TransactionalInboxOptions.retentionMs}: 7 days. */
export const DEFAULT_INBOX_RETENTION_MS = 7 * 24 * 3_600_000;

/** Thrown inside the transaction body so that it rolls back when the commit statement is refused. */
class CommitRefused extends Error {}

/**
 * A transactional inbox. It records scope, idempotency key and fencing token in the same database transaction
 * as a handler's side effect. The effect then commits at most once per key, even when a worker dies between
 * its commit and the COMPLETED write to Redis, or the Redis record is lost.
 *
 * {@link TransactionalInbox.run} does two steps for one key.
 * 1. The fence, in autocommit. It inserts the row uncommitted with the claim's fencing token, or raises the
 *    token of an uncommitted row. A committed row means the effect already happened, so it returns
 *    `duplicate` without running it. A higher token means a later claim owns the key: `LeaseLostError`.
 * 2. One transaction. It runs the side effect, then marks the row committed only if the row still holds this
 *    token and is uncommitted. Otherwise it rolls back, so the effect's writes vanish, and reports
 *    `duplicate` or throws `LeaseLostError`.
 *
 * @example
 * ```ts
 * const inbox = new TransactionalInbox({ dialect: 'postgres', client: pgClient(pool), transaction: pgTransaction(pool) });
 * await idempotency.run({ scope: 'payments', key: msg.id }, (ctx) =>
 *   inbox.run(ctx, (tx) => tx.query('INSERT INTO ledger (payment_id, cents) VALUES ($1, $2)', [msg.id, 500])));
 * ```
 */
export class TransactionalInbox {
  /** The dialect's statements on this inbox's table. */
  readonly statements: InboxStatements;
  /** The resolved retention, in milliseconds. */
  readonly retentionMs: number;
  readonly #dialect: SqlDialect;
  readonly #client: SqlClient;
  readonly #transaction: RunInTransaction;

  /** @throws {@link @idempotent-consumer/core!InvalidOptionError} for an unknown dialect, a bad table name or retention, or a missing client. */
  constructor(options: TransactionalInboxOptions) {
    if (
      !options ||
      typeof options.client?.query !== 'function' ||
      typeof options.transaction !== 'function'
    ) {
      throw new InvalidOptionError('TransactionalInbox needs { dialect, client, transaction }');
    }
    this.statements = inboxStatements(options.dialect, options.table ?? DEFAULT_INBOX_TABLE);
    const retentionMs = options.retentionMs ?? DEFAULT_INBOX_RETENTION_MS;
    if (!Number.isSafeInteger(retentionMs) || retentionMs < 1) {
      throw new InvalidOptionError(`retentionMs must be an integer >= 1, got ${retentionMs}`);
    }
    this.retentionMs = retentionMs;
    this.#dialect = options.dialect;
    this.#client = options.client;
    this.#transaction = options.transaction;
  }

  /** Creates the table and its index if missing (the same DDL as the migration files). */
  async createSchema(): Promise<void> {
    for (const statement of this.statements.schema) await this.#client.query(statement, []);
  }

  /**
   * Runs `effect` in one transaction with the inbox row, so that its writes commit at most once per scope and
   * key across every worker and retry. A run whose commit is refused is rolled back. The class description
   * lists the steps.
   *
   * @param context the handler's context: scope, key, fencing token and signal.
   * @param effect the side effect. Every write must go through `tx`, or it is not covered.
   * @returns `committed` with the effect's value, or `duplicate` with the value stored by the run that
   *   committed.
   * @throws `LeaseLostError`, retryable, when a later claim fenced this one or `context.signal` aborted
   *   before the commit. Nothing was committed.
   * @throws `InvalidKeyError` when the scope or key does not fit the table, see
   *   {@link TransactionalInbox.fence}. Nothing ran.
   * @throws `NonRetryableError` when the effect's value cannot be stored as JSON. The transaction rolled
   *   back.
   * @throws `TransactionLostError`, retryable, on MySQL and MariaDB, when a statement of the effect failed
   *   with an error after which InnoDB rolled back the whole transaction, or may have, and the effect went
   *   on. The error lists those failures. Nothing is recorded.
   * @throws whatever `effect` or the database throws, after a rollback. The core runner counts driver errors,
   *   deadlocks and serialization failures as retryable, so the claim is released and the message retried. On
   *   PostgreSQL at REPEATABLE READ or SERIALIZABLE, a claim fenced after the snapshot fails the commit
   *   statement with `40001` instead.
   * @throws `TransactionEndedError`, not retryable, from a statement the effect sends through `tx` after it
   *   settled, work it did not await. The statement is not sent, and the run ends as the effect did.
   */
  async run<T>(context: InboxContext, effect: (tx: SqlClient) => Promise<T>): Promise<InboxRunResult<T>> {
    checkContext(context);
    const fenced = await this.fence(context);
    if (fenced.status === 'duplicate') return fenced as InboxRunResult<T>;
    try {
      const result = await this.#transaction(async (tx) => {
        if (this.#dialect !== 'mysql') {
          // pg hands a statement to its connection's queue at once, so every statement the effect sent before
          // it settled runs before the commit statement or the ROLLBACK. One sent later would run after the
          // end of the transaction, in autocommit or in the pooled connection's next transaction, so it is
          // refused. An effect that throws before it returns a promise has settled too. A plain value or
          // another thenable is awaited as on MySQL.
          let ended = false;
          let value: T;
          try {
            value = await effect({
              query: (sql, params) =>
                ended ? Promise.reject(transactionEnded(context)) : tx.query(sql, params),
            });
          } finally {
            ended = true;
          }
          if (!(await this.commit(tx, context, value))) throw new CommitRefused();
          return value;
        }
        const watched = new TransactionWatch(tx, context);
        let value: T;
        try {
          value = await effect(watched.client);
        } catch (error) {
          // The ROLLBACK follows once the body rejects. The statements the effect sent before it threw are
          // still queued in the watch. They go first, inside the transaction, as PostgreSQL's connection
          // queue sends them before its ROLLBACK. So none goes out after the ROLLBACK, and each settles as it
          // would have.
          watched.end();
          await watched.drained();
          throw error;
        }
        watched.end();
        // Statements the effect sent without awaiting them are still queued. The commit statement goes after
        // them, through the watch, so it is refused if one of them lost the transaction.
        await watched.settled();
        watched.assertAlive();
        if (!(await this.commit(watched.inboxClient, context, value))) throw new CommitRefused();
        return value;
      });
      return { status: 'committed', result };
    } catch (error) {
      if (!isCommitRefused(error)) throw error;
      return this.#afterRefusal(context) as Promise<InboxRunResult<T>>;
    }
  }

  /**
   * A handler for the core runner or any adapter, whose contexts extend the core's `HandlerContext`. It runs
   * `effect` through {@link TransactionalInbox.run} and resolves with its value. That is the fresh value when
   * this run committed, or the stored one when an earlier run did, so a run after a crash completes the Redis
   * record with the same result and without a second write.
   *
   * @example
   * ```ts
   * createIdempotentConsumer({ idempotency, connection }, { queue: 'payments' },
   *   inbox.handler((tx, { message }) => tx.query('INSERT INTO ledger …', [...])));
   * ```
   */
  handler<C extends InboxContext = HandlerContext, T = unknown>(
    effect: (tx: SqlClient, context: C) => Promise<T>,
  ): (context: C) => Promise<T | undefined> {
    return async (context) => (await this.run(context, (tx) => effect(tx, context))).result;
  }

  /**
   * Step 1 of {@link TransactionalInbox.run}, for callers that open the transaction themselves. It fences the
   * key with the context's token, in autocommit on `client`.
   * @returns `proceed`, then run the transaction and end it with {@link TransactionalInbox.commit}; or
   *   `duplicate`.
   * @throws `LeaseLostError` when the row holds a higher token, and `MissingKeyError` when the context has no
   *   key. `InvalidOptionError` when it is not a handler context.
   * @throws `InvalidKeyError`, not retryable, when the scope or key is longer than the table holds
   *   ({@link InboxStatements.maxBytes}: a MySQL column, or both together over 2685 bytes on PostgreSQL),
   *   holds a NUL character on PostgreSQL ({@link InboxStatements.allowsNul}), or holds a lone surrogate.
   *   Also the database's errors.
   */
  async fence(
    context: InboxContext,
  ): Promise<{ readonly status: 'proceed' } | Extract<InboxRunResult<unknown>, { status: 'duplicate' }>> {
    checkContext(context);
    checkStorable(this.statements, context);
    await this.#client.query(this.statements.fence, [
      context.scope,
      context.key,
      context.fencingToken,
      this.retentionMs,
    ]);
    const row = await this.read(context);
    if (row?.committedAtMs !== undefined) return duplicateOf(row);
    if (row && row.fencingToken > context.fencingToken) throw fencedOut(context, row.fencingToken);
    return { status: 'proceed' };
  }

  /**
   * Step 2 of {@link TransactionalInbox.run}, the last statement of the caller's transaction. It marks the
   * row committed with `value`, stored as JSON, if the row is still uncommitted and holds the context's
   * token.
   * @returns true when marked, so commit the transaction. False when refused. Then roll back, and
   *   {@link TransactionalInbox.read} tells whether the key committed elsewhere or was fenced. On MySQL and
   *   MariaDB, call it only if no statement of the transaction failed with an error after which InnoDB rolls
   *   back the whole transaction, as listed on `TransactionLostError`. Otherwise this statement would commit
   *   the row without the earlier writes. Unlike {@link TransactionalInbox.run}, it cannot see the effect's
   *   statements.
   * @throws `LeaseLostError` when `context.signal` is aborted, and `NonRetryableError` when `value` is not
   *   JSON.
   */
  async commit(tx: SqlClient, context: InboxContext, value: unknown): Promise<boolean> {
    if (context.signal?.aborted) {
      throw new LeaseLostError(`The claim of ${context.scope}/${context.key} was lost before the commit`, {
        cause: context.signal.reason,
      });
    }
    let result: string | null;
    try {
      result = value === undefined ? null : (JSON.stringify(value) ?? null);
    } catch (error) {
      throw new NonRetryableError('The side effect returned a value that cannot be stored as JSON', {
        cause: error,
      });
    }
    const { rowCount } = await tx.query(this.statements.commit, [
      result,
      this.retentionMs,
      context.scope,
      context.key,
      context.fencingToken,
    ]);
    return rowCount === 1;
  }

  /** Reads one key's row in autocommit, `undefined` when there is none. */
  async read(id: { readonly scope: string; readonly key: string }): Promise<InboxRow | undefined> {
    const { rows } = await this.#client.query(this.statements.read, [id.scope, id.key]);
    const row = rows[0];
    if (!row) return undefined;
    const committed = row.committed_at_ms;
    return {
      fencingToken: Number(row.fencing_token),
      committedAtMs: committed === null || committed === undefined ? undefined : Number(committed),
      result: row.result === null || row.result === undefined ? undefined : String(row.result),
    };
  }

  /**
   * Deletes rows whose retention ended, `batchSize` at a time, until a batch comes back short. Each batch is
   * one statement on the `expires_at` index. Run it periodically, from a cron job or a timer.
   * @returns how many rows were deleted.
   */
  async deleteExpired(options: { readonly batchSize?: number } = {}): Promise<number> {
    const batchSize = options.batchSize ?? 1000;
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
      throw new InvalidOptionError(`batchSize must be an integer >= 1, got ${batchSize}`);
    }
    let deleted = 0;
    for (;;) {
      const { rowCount } = await this.#client.query(this.statements.deleteExpired, [batchSize]);
      deleted += rowCount;
      if (rowCount < batchSize) return deleted;
    }
  }

  async #afterRefusal(context: InboxContext & { key: string }): Promise<InboxRunResult<unknown>> {
    const row = await this.read(context);
    if (row?.committedAtMs !== undefined) return duplicateOf(row);
    throw fencedOut(context, row?.fencingToken);
  }
}

/**
 * The `tx` given to the effect on MySQL and MariaDB, watching its statements' errors. InnoDB answers some
 * errors by rolling back the whole transaction, not only the failed statement; {@link transactionLossOf}
 * lists them. A session that carries on is then in autocommit, or in a new transaction after MariaDB's bulk
 * insert. An effect that caught the error and went on would commit its later writes without the earlier ones,
 * and the inbox's commit statement would record the key as done.
 *
 * So once the transaction is known lost, every later statement and the commit are refused with
 * `TransactionLostError`, unsent. Statements are sent one at a time, each after the previous one settled and
 * its failure was judged. Otherwise the driver would send a statement issued alongside the failing one right
 * after the rollback, in autocommit. Once the effect settled, what it sends is refused, and what it sent
 * before goes before the commit statement or the ROLLBACK.
 *
 * PostgreSQL needs no watch, because it refuses every statement of a failed transaction itself. Statements
 * the effect runs on another object, such as an ORM's own transaction handle, are not seen.
 */
class TransactionWatch {
  /** Set when a statement through {@link TransactionWatch.client} failed and took the transaction with it. */
  #lost: TransactionLostError | undefined;
  /**
   * The error of the last statement, not judged yet. It is judged by {@link transactionLossOf} only when
   * another statement is to be sent or the commit prepared. A failure the effect lets propagate rolls the
   * transaction back anyway, so it costs no read of the settings.
   */
  #unjudged: { readonly error: unknown } | undefined;
  /** Settles when the last statement sent through {@link TransactionWatch.client} has settled and been judged. */
  #last: Promise<unknown> = Promise.resolve();
  /** Set when the effect settled. Statements it sends later are refused. */
  #ended = false;
  /** The effect's `tx`: refuses what the effect sends after it settled. */
  readonly client: SqlClient;
  /** The inbox's own `tx` for the commit statement, queued after the effect's statements. */
  readonly inboxClient: SqlClient;

  constructor(
    private readonly tx: SqlClient,
    private readonly context: InboxContext,
  ) {
    this.client = { query: (sql, params) => this.#enqueue(sql, params, this.#ended) };
    this.inboxClient = { query: (sql, params) => this.#enqueue(sql, params, false) };
  }

  /**
   * The effect settled, by returning or throwing. Every statement it sends from now on is refused unsent,
   * with `TransactionEndedError` or the `TransactionLostError` of a failure judged before. Those it sent
   * before stay queued and are sent as usual. The caller awaits them with {@link TransactionWatch.settled} or
   * {@link TransactionWatch.drained} before the commit statement or the ROLLBACK.
   */
  end(): void {
    this.#ended = true;
  }

  /**
   * Queues one statement behind the ones sent before. A `late` statement, sent by the effect after it
   * settled, is refused once the failure before it, if any, was judged.
   */
  #enqueue(sql: string, params: readonly unknown[], late: boolean): Promise<SqlResult> {
    const sent = this.#last.then(async () => {
      // A late statement needs no judgement, since settled() queued the one of the failure before it.
      if (!late) await this.#judge();
      if (this.#lost) throw this.#lost;
      if (late) throw transactionEnded(this.context);
      try {
        return await this.tx.query(sql, params);
      } catch (error) {
        this.#unjudged = { error };
        throw error;
      }
    });
    this.#last = sent.catch(() => undefined);
    return sent;
  }

  /**
   * Resolves once every statement sent through {@link TransactionWatch.client} so far has settled, without
   * judging the last one's failure. What follows is the ROLLBACK, which a lost transaction does not change.
   * Never rejects.
   */
  async drained(): Promise<void> {
    await this.#last;
  }

  /**
   * Resolves once every statement sent through {@link TransactionWatch.client} so far has settled and a
   * failure among them was judged. {@link TransactionWatch.assertAlive} then knows whether it lost the
   * transaction.
   */
  async settled(): Promise<void> {
    // Judged in the statement queue. A statement the effect queues meanwhile, such as a detached recovery
    // after a caught failure, waits for the judgement and is refused unsent when the transaction was lost.
    const judged = this.#last.then(() => this.#judge());
    this.#last = judged.catch(() => undefined);
    await judged;
  }

  /** Throws `TransactionLostError` when the transaction was rolled back under the effect. */
  assertAlive(): void {
    if (this.#lost) throw this.#lost;
  }

  /**
   * Judges the failure not judged yet, if any, before anything else is sent on the session. It marks the
   * transaction lost when InnoDB rolled it back whole, or may have, per {@link transactionLossOf}. By default
   * a failed statement is rolled back alone and the transaction stays whole.
   */
  async #judge(): Promise<void> {
    const unjudged = this.#unjudged;
    if (!unjudged) return;
    this.#unjudged = undefined;
    if (this.#lost) return;
    const { error } = unjudged;
    const loss = await transactionLossOf(error, this.tx);
    if (!loss) return;
    const { scope, key } = this.context;
    this.#lost = new TransactionLostError(
      `The transaction of ${scope}/${key} ${loss.certain ? 'was' : 'may have been'} rolled back by the database (${loss.reason}) and the side effect carried on: nothing is recorded; retry the whole effect`,
      { cause: error },
    );
  }
}

/** True for the refusal, also when an ORM's transaction call wrapped it as `cause`. */
function isCommitRefused(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof CommitRefused) return true;
  }
  return false;
}

function checkContext(context: InboxContext): asserts context is InboxContext & { key: string } {
  if (context && context.key === undefined && typeof context.scope === 'string') {
    throw new MissingKeyError(
      `A delivery of ${context.scope} without an idempotency key cannot go through the inbox (missingKey: 'process'?)`,
    );
  }
  if (
    typeof context?.scope !== 'string' ||
    typeof context.key !== 'string' ||
    !Number.isSafeInteger(context.fencingToken) ||
    context.fencingToken < 0
  ) {
    throw new InvalidOptionError('The inbox needs the handler context: { scope, key, fencingToken }');
  }
}

/** `String.prototype.isWellFormed`, from ES2024 and Node 20, absent from this package's ES2023 library. */
type WellFormedCheck = string & { isWellFormed(): boolean };

/**
 * Refuses a scope or key the table cannot store as it is, before any statement. Retrying cannot help, so the
 * error is not retryable.
 * - Not well-formed UTF-16, a lone surrogate. Both drivers send it as U+FFFD, so two different keys would
 *   share one row and the second message would be reported a duplicate without its effect running. The core's
 *   runner refuses these too; this covers contexts built by hand.
 * - Holding NUL where the column cannot, see {@link InboxStatements.allowsNul}. PostgreSQL `text` fails the
 *   fence with 22021, a driver error the runner would retry until `maxAttempts`.
 * - Longer than the column. MySQL would fail the fence with a driver error, retried in vain. Without strict
 *   mode it would store the key truncated, and the run's reads and commit, which compare the whole key, would
 *   never find the row.
 * - Scope and key together longer than the primary key holds. PostgreSQL fails the fence with 54000, its
 *   B-tree's row size limit, a driver error retried in vain.
 */
function checkStorable(statements: InboxStatements, context: InboxContext & { key: string }): void {
  const max = statements.maxBytes;
  let together = 0;
  for (const [what, value, limit] of [
    ['scope', context.scope, max.scope],
    ['idempotency key', context.key, max.key],
  ] as const) {
    if (!(value as WellFormedCheck).isWellFormed()) {
      throw new InvalidKeyError(`The ${what} is not well-formed UTF-16 (it contains a lone surrogate)`);
    }
    if (!statements.allowsNul && value.includes('\0')) {
      throw new InvalidKeyError(
        `The ${what} contains a NUL character, which the inbox table's column cannot hold`,
      );
    }
    const bytes = Buffer.byteLength(value, 'utf8');
    if (bytes > limit) {
      throw new InvalidKeyError(
        `The ${what} is ${bytes} bytes long; the inbox table's column holds at most ${limit} bytes`,
      );
    }
    together += bytes;
  }
  if (together > max.together) {
    throw new InvalidKeyError(
      `The scope and the idempotency key are ${together} bytes long together; the inbox table's primary key holds at most ${max.together} bytes`,
    );
  }
}

function duplicateOf(row: InboxRow): Extract<InboxRunResult<unknown>, { status: 'duplicate' }> {
  return {
    status: 'duplicate',
    result: row.result === undefined ? undefined : JSON.parse(row.result),
    fencingToken: row.fencingToken,
    committedAtMs: row.committedAtMs ?? 0,
  };
}

function transactionEnded(context: InboxContext): TransactionEndedError {
  return new TransactionEndedError(
    `A statement of ${context.scope}/${context.key} was sent through tx after the effect settled (work the effect did not await): refused, not sent, as it would run outside the transaction`,
  );
}

function fencedOut(context: InboxContext, current: number | undefined): LeaseLostError {
  return new LeaseLostError(
    current === undefined
      ? `The inbox row of ${context.scope}/${context.key} vanished before the commit (deleted as expired?)`
      : `The inbox row of ${context.scope}/${context.key} is fenced by token ${current}; this claim holds ${context.fencingToken}`,
  );
}
