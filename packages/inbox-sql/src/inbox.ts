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
 * What the inbox needs from a handler's context: the core's `HandlerContext` and every adapter's fit.
 * `key` may be `undefined` only to accept contexts of deliveries run without a key (RabbitMQ's
 * `missingKey: 'process'`): the inbox then throws `MissingKeyError`.
 */
export type InboxContext = Pick<HandlerContext, 'scope' | 'fencingToken'> & {
  readonly key: string | undefined;
  /** When given and aborted (the claim was lost), the transaction rolls back before its commit statement. */
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
       * The inbox row was already committed (by an earlier run of this key: a crashed or lease-lost
       * worker, a redelivery after the Redis record was lost): the side effect was not run again.
       */
      readonly status: 'duplicate';
      /** The value the committing run's side effect returned (JSON round-tripped), `undefined` if none. */
      readonly result: T | undefined;
      /** The fencing token of the run that committed. */
      readonly fencingToken: number;
      /**
       * When it committed, in whole ms since the epoch (floored) on the database's clock: the time of its
       * commit statement, the transaction's last, a moment before the transaction's `COMMIT`.
       */
      readonly committedAtMs: number;
    };

/** The state of one key's inbox row. */
export interface InboxRow {
  readonly fencingToken: number;
  /** `undefined` while uncommitted (fenced by a claim whose transaction has not committed). */
  readonly committedAtMs: number | undefined;
  /** The stored result as JSON text, `undefined` when none. */
  readonly result: string | undefined;
}

/** Options of {@link TransactionalInbox}. */
export interface TransactionalInboxOptions {
  /** `postgres` (PostgreSQL 12+) or `mysql` (MySQL 8, MariaDB 10.5+). */
  readonly dialect: SqlDialect;
  /**
   * Runs statements outside any transaction (autocommit): the fence before the transaction and the
   * reads after a refused commit. Usually the pool: `pgClient(pool)`, `mysqlClient(pool)`.
   */
  readonly client: SqlClient;
  /** Runs a body in one transaction: `pgTransaction(pool)`, `mysqlTransaction(pool)`, or the ORM's. */
  readonly transaction: RunInTransaction;
  /**
   * Table name, optionally `schema.table`. Default `idempotency_inbox`. The table's own name is at most 52
   * characters, so its expiry index's name (`<table>_expires_at`) fits the databases' 63.
   */
  readonly table?: string;
  /**
   * How long a row is kept after its last write, in milliseconds, before {@link TransactionalInbox.deleteExpired}
   * may delete it. Must outlast every redelivery of the key (and the Redis record's retention): a
   * redelivery after the row is gone runs the side effect again. Default 7 days (604 800 000).
   */
  readonly retentionMs?: number;
}

/** Default {@link TransactionalInboxOptions.retentionMs}: 7 days. */
export const DEFAULT_INBOX_RETENTION_MS = 7 * 24 * 3_600_000;

/** Thrown inside the transaction body to make the transaction roll back when the commit statement is refused. */
class CommitRefused extends Error {}

/**
 * A transactional inbox: records (scope, idempotency key, fencing token) in the same database transaction
 * as a handler's side effect, so the effect commits at most once per key, even when a worker dies
 * between its commit and the COMPLETED write to Redis, or the Redis record is lost (docs/design.md).
 *
 * {@link TransactionalInbox.run} does, for one key:
 * 1. fence (autocommit): insert the row uncommitted with the claim's fencing token, or raise the token of
 *    an uncommitted row; a committed row means the effect already happened: return `duplicate` without
 *    running it; a higher token means a later claim owns the key: throw `LeaseLostError`;
 * 2. in one transaction: run the side effect, then mark the row committed only if it still holds this
 *    token and is uncommitted; if it does not, roll back (the effect's writes vanish) and report
 *    `duplicate` or throw `LeaseLostError`.
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
   * Runs `effect` in one transaction with the inbox row, so its writes commit at most once per
   * (scope, key) across every worker and every retry (a run whose commit is refused is rolled back). See
   * the class description for the steps.
   *
   * @param context the handler's context (scope, key, fencing token, signal).
   * @param effect the side effect; every write must go through `tx` (the transaction), or it is not covered.
   * @returns `committed` with the effect's value, or `duplicate` with the value stored by the run that committed.
   * @throws `LeaseLostError` (retryable) when a later claim of the key fenced this one, or `context.signal`
   *   aborted before the commit: nothing was committed. `InvalidKeyError` when the scope or key does not fit
   *   the table (see {@link TransactionalInbox.fence}): nothing ran. `NonRetryableError` when the effect's value cannot
   *   be stored as JSON (rolled back). `TransactionLostError` (retryable; MySQL/MariaDB) when a statement the
   *   effect ran through `tx` failed with an error after which InnoDB had rolled back the whole transaction,
   *   or may have (a deadlock, a full lock table; the list is on `TransactionLostError`), and the effect
   *   carried on: InnoDB had rolled the transaction back, so nothing is recorded. Whatever `effect` or the
   *   database throws (rolled back; the driver's errors, deadlocks and serialization failures included, count
   *   as retryable for the core runner, so the claim is released and the message retried). On PostgreSQL at
   *   REPEATABLE READ or SERIALIZABLE, a claim fenced after the transaction's snapshot fails its commit
   *   statement with the driver's `40001` instead of `LeaseLostError`/`duplicate`: nothing was committed.
   *   A statement the effect sends through `tx` after it settled (returned or threw: work it did not await)
   *   is not sent: that statement's promise rejects with `TransactionEndedError` (not retryable), since it
   *   would run after the transaction's end; the run ends as the effect did.
   */
  async run<T>(context: InboxContext, effect: (tx: SqlClient) => Promise<T>): Promise<InboxRunResult<T>> {
    checkContext(context);
    const fenced = await this.fence(context);
    if (fenced.status === 'duplicate') return fenced as InboxRunResult<T>;
    try {
      const result = await this.#transaction(async (tx) => {
        if (this.#dialect !== 'mysql') {
          // pg hands a statement to its connection's queue at once: every statement the effect sent before
          // it settled runs before the commit statement or the ROLLBACK. One sent later would run after the
          // transaction's end (in autocommit, or in the next transaction of the pooled connection): refused.
          // An effect that throws before it returns a promise (a plain function) has settled too, and one
          // that returns a plain value or another thenable is awaited as on MySQL.
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
          // still queued in the watch: they are sent first, inside the transaction (as PostgreSQL's
          // connection queue sends them before its ROLLBACK), so none goes out after the ROLLBACK, and each
          // settles as it would have (a refused one would reject a promise the effect may not hold).
          watched.end();
          await watched.drained();
          throw error;
        }
        watched.end();
        // Statements the effect sent without awaiting them are still queued: the commit statement goes
        // after them, through the watch, so it is refused if one of them lost the transaction.
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
   * A handler for the core runner or any adapter (their contexts extend the core's `HandlerContext`) that
   * runs `effect` through {@link TransactionalInbox.run} and resolves with its value: the fresh one when
   * this run committed, the stored one when an earlier run had (so a run after a crash completes the
   * Redis record with the same result, without a second write).
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
   * Step 1 of {@link TransactionalInbox.run}, for callers that open the transaction themselves: fences
   * the key with the context's token (autocommit, on `client`).
   * @returns `proceed` (run the transaction, ending with {@link TransactionalInbox.commit}) or `duplicate`.
   * @throws `LeaseLostError` when the row holds a higher token; `MissingKeyError` when the context has no
   *   key; `InvalidOptionError` when it is not a handler context; `InvalidKeyError` (not retryable) when the
   *   scope or key is longer than the table holds ({@link InboxStatements.maxBytes}: a MySQL column, both
   *   together over 2685 bytes on PostgreSQL), holds a NUL
   *   character the column cannot ({@link InboxStatements.allowsNul}: PostgreSQL) or a lone surrogate; the
   *   database's errors.
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
   * Step 2 of {@link TransactionalInbox.run}: the last statement of the caller's transaction. Marks the row
   * committed with `value` (stored as JSON) if it is still uncommitted and holds the context's token.
   * @returns true when marked (commit the transaction); false when refused: roll back, then
   *   {@link TransactionalInbox.read} tells whether the key committed elsewhere or was fenced.
   *   On MySQL/MariaDB, call it only if no statement of the transaction failed with an error after which
   *   InnoDB rolls back the whole transaction (a deadlock, a full lock table; the list is on
   *   `TransactionLostError`): this statement would then commit the row without the earlier writes.
   *   Unlike {@link TransactionalInbox.run}, it cannot see the effect's statements.
   * @throws `LeaseLostError` when `context.signal` is aborted; `NonRetryableError` when `value` is not JSON.
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

  /** Reads one key's row (autocommit), `undefined` when there is none. */
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
   * Deletes rows whose retention ended, `batchSize` at a time (each batch one statement on the
   * `expires_at` index), until a batch comes back short. Run it periodically (a cron job, a timer).
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
 * MySQL/MariaDB: the `tx` given to the effect, watching its statements' errors. InnoDB answers some
 * errors by rolling back the whole transaction, not only the failed statement (a deadlock, a full lock
 * table, and the others of {@link transactionLossOf}); a session that carries on is then in autocommit, or
 * (after MariaDB's bulk insert) in a new transaction. An effect that caught the error and continued would
 * have its later writes committed without the earlier ones (and made again by the retry), and the inbox's
 * commit statement would record the key as done while the writes before the error are
 * gone. So once the transaction is known lost, every later statement through the watch, and the commit,
 * is refused with `TransactionLostError` without being sent. Statements are sent one at a time, each after
 * the previous one settled (and its failure was judged): the driver would otherwise send a statement the
 * effect issued alongside the failing one (`Promise.all`) right after the rollback, in autocommit. Once
 * the effect settled ({@link TransactionWatch.end}), what it sends is refused; what it sent before is sent
 * before the commit statement ({@link TransactionWatch.settled}), or, when it threw, before the ROLLBACK
 * ({@link TransactionWatch.drained}).
 * PostgreSQL needs no watch: it refuses every statement of a failed transaction itself. Statements the
 * effect runs on another object (an ORM's own transaction handle) are not seen.
 */
class TransactionWatch {
  /** Set when a statement through {@link TransactionWatch.client} failed and took the transaction with it. */
  #lost: TransactionLostError | undefined;
  /**
   * The error of the last statement, not judged yet: judged ({@link transactionLossOf}) only when another
   * statement is to be sent, or the commit prepared. A failure the effect lets propagate rolls the
   * transaction back anyway, so it costs no read of the settings.
   */
  #unjudged: { readonly error: unknown } | undefined;
  /** Settles when the last statement sent through {@link TransactionWatch.client} has settled and been judged. */
  #last: Promise<unknown> = Promise.resolve();
  /** Set when the effect settled ({@link TransactionWatch.end}): statements it sends later are refused. */
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
   * The effect settled (returned or threw): every statement it sends from now on is refused without being
   * sent (`TransactionEndedError`, or the `TransactionLostError` of a failure judged before). Those it sent
   * before stay queued and are sent as usual: the caller awaits them ({@link TransactionWatch.settled} or
   * {@link TransactionWatch.drained}) before the commit statement or the ROLLBACK.
   */
  end(): void {
    this.#ended = true;
  }

  /**
   * Queues one statement behind the ones sent before; `late` (sent by the effect after it settled) refuses
   * it once the failure before it, if any, was judged.
   */
  #enqueue(sql: string, params: readonly unknown[], late: boolean): Promise<SqlResult> {
    const sent = this.#last.then(async () => {
      // A late statement needs no judgement: settled() queued the one of the failure before it.
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
   * Resolves once every statement sent through {@link TransactionWatch.client} so far has settled (each
   * judged the failure before it, as usual), without judging the last one's failure: what follows is the
   * ROLLBACK, which a lost transaction does not change. Never rejects.
   */
  async drained(): Promise<void> {
    await this.#last;
  }

  /**
   * Resolves once every statement sent through {@link TransactionWatch.client} so far has settled, and a
   * failure among them was judged (so {@link TransactionWatch.assertAlive} knows whether it lost the
   * transaction).
   */
  async settled(): Promise<void> {
    // Judged in the statement queue: a statement the effect queues meanwhile (a detached recovery after a
    // caught failure) waits for the judgement, and is refused, not sent, when the transaction was lost.
    const judged = this.#last.then(() => this.#judge());
    this.#last = judged.catch(() => undefined);
    await judged;
  }

  /** Throws `TransactionLostError` when the transaction was rolled back under the effect (before the commit statement). */
  assertAlive(): void {
    if (this.#lost) throw this.#lost;
  }

  /**
   * Judges the failure not judged yet, if any, before anything else is sent on the session: marks the
   * transaction lost when InnoDB rolled it back whole, or may have ({@link transactionLossOf}: by default
   * a failed statement is rolled back alone and the transaction stays whole).
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

/** True for the refusal, also when an ORM's transaction call wrapped it (as `cause`). */
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

/** `String.prototype.isWellFormed` (ES2024, Node 20+), absent from the ES2023 library this package uses. */
type WellFormedCheck = string & { isWellFormed(): boolean };

/**
 * Refuses, before any statement, a scope or key the table cannot store as it is; retrying cannot help,
 * so the error is not retryable:
 * - not well-formed UTF-16 (a lone surrogate): both drivers send it as U+FFFD, so two different keys would
 *   share one row and the second message would be reported a duplicate without its effect running (the
 *   core's runner refuses these too; this covers contexts built by hand);
 * - holding NUL where the column cannot ({@link InboxStatements.allowsNul}: PostgreSQL `text` fails the
 *   fence with 22021, a driver error the runner would retry until `maxAttempts`);
 * - longer than the column: MySQL would fail the fence with a driver error (retried by the runner, in
 *   vain), or, without strict mode, store it truncated, and the run's reads and commit, comparing the whole
 *   key, would then never find the row (`LeaseLostError` on every retry);
 * - scope and key together longer than the primary key holds: PostgreSQL fails the fence with 54000 (its
 *   B-tree's row size limit), a driver error retried in vain.
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
