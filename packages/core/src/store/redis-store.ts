import {
  InvalidOptionError,
  isIdempotencyError,
  ReplicationTimeoutError,
  StoreUnavailableError,
  UnexpectedReplyError,
  type WrittenClaim,
} from '../errors';
import { checkMaxKeyBytes, type RecordId, RecordKeyBuilder } from '../keys';
import { MAX_TIMER_MS } from '../kit/long-timeout';
import { masterConnections } from './cluster-node';
import { CommandDeadlines } from './command-deadlines';
import { ConnectionCheck, wasNotSent } from './connection-check';
import {
  decodeClaimReply,
  decodeExtendReply,
  decodeMarkDeadLetteredReply,
  decodeStartReply,
  decodeState,
  decodeWriteReply,
} from './decode-reply';
import type {
  AcquiredReply,
  ClaimOptions,
  ClaimReply,
  ClaimRequest,
  ExtendReply,
  FailOptions,
  IdempotencyRecord,
  IdempotencyStore,
  MarkDeadLetteredReply,
  OutcomeWaitOptions,
  ReleaseOptions,
  StartReply,
  WriteReply,
} from './idempotency-store';
import { OutcomeNotifications } from './outcome-notifications';
import { waitForOutcome } from './outcome-wait';
import { type PendingRelease, PendingReleases } from './pending-releases';
import type { RedisClient } from './redis-client';
import { checkWaitForReplicas, type WaitForReplicasOptions, waitForReplicas } from './replica-wait';
import { type DefinedScript, defineScripts, evalScript, type ScriptName, scriptArgs } from './scripts';
import { unansweredError } from './unanswered-error';
import { claimToGiveBack, unrunReleaseOptions } from './unrun-release';
import {
  type CorkableStream,
  checkMaxCommandsPerWrite,
  DEFAULT_MAX_COMMANDS_PER_WRITE,
  WriteCoalescer,
} from './write-coalescer';

/** Options of {@link RedisIdempotencyStore}. */
export interface RedisIdempotencyStoreOptions {
  /**
   * Prefix of every record key, so that several applications can share one Redis. No prefix may be another
   * followed by `:`, because `app` and `app:1:a` can build the same key, see docs/design.md#record-keys.
   * @defaultValue `'idem'`
   */
  keyPrefix?: string;
  /**
   * Longest accepted prefix, scope or idempotency key, in UTF-8 bytes. An integer >= 1, else
   * `InvalidOptionError`.
   * @defaultValue 512
   */
  maxKeyBytes?: number;
  /**
   * How long one store call may take before it rejects with `StoreUnavailableError`, in milliseconds.
   * Redis may still apply a claim that timed out, or whose connection was lost. The store then gives it
   * back unrun before its next command once the client is connected again, so no attempt is spent and the
   * next claim is ACQUIRED (pending-releases.ts). A command is never queued while the client is not
   * connected (connection-check.ts). Keep it well above Redis's latency under load. At most 2^31 - 1,
   * Node's longest timer, else `InvalidOptionError`.
   * @defaultValue 2000
   */
  commandTimeoutMs?: number;
  /**
   * How many of this store's script calls may leave in one socket write on a standalone client. While
   * any of its calls is in flight, the store corks the client's socket before a call and uncorks it after
   * this many calls or at the end of the tick, whichever comes first. A call made while none is in flight
   * is written at once. Nothing waits for a timer, and commands keep their order. Each write wakes the
   * Redis server, so this halves the client's CPU per call at tens of calls in flight. Measured on
   * duplicates at 50 in flight: 15.7 → 7.7 µs of client CPU per call. Other commands sent on the client in
   * the same tick share the same writes. `1` writes each call at once. On a Cluster client the store does
   * not coalesce, and ioredis's auto-pipelining batches calls per node when turned on. An integer ≥ 1,
   * else `InvalidOptionError`.
   * @defaultValue 8
   */
  maxCommandsPerWrite?: number;
  /**
   * Whether {@link RedisIdempotencyStore.waitForOutcome} listens for the outcome notifications the scripts
   * publish by sharded Pub/Sub, Redis 7.0+. It listens on a connection duplicated from the client when the
   * first wait begins and closed after a second without waits. With `false` it only polls, every 2 ms at
   * first and doubling up to 20 ms. @defaultValue `true`
   */
  outcomeNotifications?: boolean;
  /**
   * Durability through a failover. After each write that matters, a claim that took or failed the record or a
   * complete, release or fail, the store sends `WAIT replicas timeoutMs`. It rejects with
   * `ReplicationTimeoutError` when fewer replicas acknowledged the write in time, though the write stands on
   * the primary, see replica-wait.ts. `timeoutMs` must be below `commandTimeoutMs`.
   *
   * A claim that counts its attempt is then made as a reservation, and counted by `start`, one more round
   * trip, only once its replicas acknowledged it. So a claim that timed out, whose handler did not run,
   * spends no attempt during a failover. It is given back unrun before the call rejects, so its redelivery
   * can claim the key at once. An applied claim whose `WAIT` or `start` goes unanswered rejects with a
   * `StoreUnavailableError` whose `writtenClaim` names it. `Idempotency.run` failing open releases it
   * abandoned after its handler, and otherwise the runner gives it back unrun. A `claimMany` that fails gives
   * back every claim it wrote, its failed keys' own too.
   * @defaultValue none, so writes resolve once the primary applied them
   */
  waitForReplicas?: WaitForReplicasOptions;
}

/**
 * Reply errors that mean the server cannot serve now. A failover to a read-only replica, loading, a cluster
 * reconfiguring, a server full under `noeviction` that answers `OOM` until memory is freed, or one that
 * cannot persist after a failed RDB save and answers `MISCONF`.
 */
const TRANSIENT_REPLY =
  /^(LOADING|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|READONLY|BUSY|MOVED|ASK|NOREPLICAS|OOM|MISCONF)\b/;

/**
 * The probe of {@link RedisIdempotencyStore.ping}. A script declared with Redis 7 flags and without
 * `no-writes`, which the server refuses before running it while it could not take a write. That is `OOM` when
 * full, `READONLY` on a replica, `MISCONF` when unable to persist, where a `PING` would answer except under
 * `MISCONF`. It writes nothing.
 */
const WRITABLE_PROBE = "#!lua\nreturn 'PONG'";

/**
 * {@link IdempotencyStore} on Redis through ioredis, standalone or Cluster. Each operation is one Lua script
 * on one key, so it is Cluster safe without hash tags. It is sent with EVALSHA, and with EVAL when the server
 * answers NOSCRIPT after a restart or SCRIPT FLUSH emptied its script cache. `claimMany`'s pipeline, and
 * every call on a Cluster, use the scripts registered with `defineCommand` under names that carry their
 * SHA-1, as ioredis's `lib/Script.ts` does. Scripts never run inside MULTI. On a standalone client concurrent
 * calls share socket writes, see `maxCommandsPerWrite`. On a Cluster, a client with
 * `enableAutoPipelining: true` batches them per node.
 *
 * @example
 * ```ts
 * const store = new RedisIdempotencyStore({ redis: new Redis(process.env.REDIS_URL) }, { keyPrefix: 'payments' });
 * ```
 * @throws {@link InvalidOptionError} from the constructor when an option is out of range.
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  readonly #redis: RedisClient;
  readonly #keys: RecordKeyBuilder;
  readonly #timeoutMs: number;
  readonly #deadlines: CommandDeadlines;
  readonly #commands: Record<ScriptName, string>;
  readonly #notifications: OutcomeNotifications | undefined;
  readonly #wait: WaitForReplicasOptions | undefined;
  readonly #writes: WriteCoalescer | undefined;
  readonly #connection: ConnectionCheck;
  readonly #owed = new PendingReleases((again) => this.#releaseDue(again));
  /** Whether a `ready` listener waits to send the releases owed (see #releaseDue). */
  #sendOnReady = false;

  constructor(dependencies: { redis: RedisClient }, options: RedisIdempotencyStoreOptions = {}) {
    if (!dependencies?.redis) throw new InvalidOptionError('RedisIdempotencyStore needs { redis }');
    this.#redis = dependencies.redis;
    this.#timeoutMs = options.commandTimeoutMs ?? 2000;
    // Node's timers take at most 2^31 - 1 ms, and a longer delay would fire after 1 ms.
    if (!(this.#timeoutMs > 0 && this.#timeoutMs <= MAX_TIMER_MS)) {
      throw new InvalidOptionError(`commandTimeoutMs must be > 0 and <= ${MAX_TIMER_MS}`);
    }
    const timeoutMs = this.#timeoutMs;
    const redis = this.#redis;
    this.#deadlines = new CommandDeadlines(timeoutMs, () => unansweredError(timeoutMs, redis.status));
    const maxKeyBytes = checkMaxKeyBytes(options.maxKeyBytes);
    this.#keys = new RecordKeyBuilder(options.keyPrefix ?? 'idem', maxKeyBytes); // checks the prefix
    this.#wait = options.waitForReplicas && checkWaitForReplicas(options.waitForReplicas);
    if (this.#wait && this.#wait.timeoutMs >= this.#timeoutMs) {
      throw new InvalidOptionError('waitForReplicas.timeoutMs must be below commandTimeoutMs');
    }
    const maxCommandsPerWrite = checkMaxCommandsPerWrite(
      options.maxCommandsPerWrite ?? DEFAULT_MAX_COMMANDS_PER_WRITE,
    );
    this.#writes =
      maxCommandsPerWrite > 1 && !this.#redis.isCluster ? new WriteCoalescer(maxCommandsPerWrite) : undefined;
    this.#commands = defineScripts(this.#redis);
    this.#connection = new ConnectionCheck(this.#redis);
    this.#notifications =
      options.outcomeNotifications === false
        ? undefined
        : new OutcomeNotifications(this.#redis, {
            subscribeTimeoutMs: Math.min(this.#timeoutMs, 1000),
            idleMs: 1000,
          });
  }

  /**
   * The ioredis client given to the constructor, which still belongs to the application. The adapters read it
   * to listen for its connection errors and to name its host in error messages.
   */
  get redis(): RedisClient {
    return this.#redis;
  }

  /**
   * Closes the connection that listens for outcome notifications, if one is open. It also closes by itself a
   * second after the last wait. The client given to the constructor is left to its owner.
   */
  close(): void {
    this.#notifications?.close();
  }

  /** The Redis key of a record, for inspection and tests, see `buildRecordKey`. */
  recordKey(id: RecordId): string {
    return this.#keys.build(id);
  }

  async claim(id: RecordId, options: ClaimOptions): Promise<ClaimReply> {
    if (this.#wait === undefined) {
      const key = this.recordKey(id);
      const nonce = this.#owed.nonce();
      return this.#sendClaim(key, scriptArgs.claim(options, nonce), nonce, options.retentionMs);
    }
    return this.#claimReplicated(this.recordKey(id), options);
  }

  /**
   * Sends one claim made with `nonce` (its arguments `args`) and decodes the reply. A claim whose reply never
   * came is owed its give-back ({@link RedisIdempotencyStore.#unansweredClaim}).
   */
  async #sendClaim(
    key: string,
    args: (string | number)[],
    nonce: string,
    retentionMs: number,
  ): Promise<ClaimReply> {
    let reply: unknown;
    try {
      reply = await this.#call('claim', key, args);
    } catch (error) {
      this.#unansweredClaim(error, key, nonce, retentionMs);
      throw error;
    }
    return decodeClaimReply(reply);
  }

  /**
   * A claim sent with `nonce` failed with `error`: unless it was never sent or Redis answered it (with an
   * error: nothing was written), it may still be applied, and is given back before the store's next
   * command once the client is connected (pending-releases.ts).
   */
  #unansweredClaim(error: unknown, key: string, nonce: string, retentionMs: number): void {
    if (wasNotSent(error) || answeredWithError(error)) return;
    this.#owed.add({ key, retentionMs, nonce });
  }

  /**
   * Releases this store owes and Redis has not answered yet (pending-releases.ts): of claims whose reply
   * never came, and `release` calls it did not answer.
   */
  get pendingReleases(): number {
    return this.#owed.size;
  }

  /**
   * One claim, replicated when `waitForReplicas` is set. Then a counted claim (`reserve` not set) is made
   * as a reservation, `WAIT`ed for, and only then counted with `start`: a claim whose replicas do not
   * acknowledge it in time (`ReplicationTimeoutError`, its handler does not run) is given back unrun
   * (`release`, one try; a give-back that fails leaves a reservation, whose lapsed lease the next claim
   * acquires without an attempt spent) before it rejects. Counted at once, every such claim during a
   * failover spent an attempt of a handler that never ran, until `maxAttempts` failed the record
   * (ATTEMPTS_EXHAUSTED) unrun; left held, its redelivery met CONFLICT until the lease lapsed. A claim
   * applied whose `WAIT` or `start` then goes unanswered rejects with a `StoreUnavailableError` naming it
   * (`writtenClaim`), so that a caller that runs its handler anyway (`storeFailureMode: 'open'`) can mark
   * it abandoned, and any other gives it back.
   * @param written - set to each claim this call wrote and still holds (for `claimMany`, which gives back
   *   the claims of a batch that failed).
   */
  async #claimReplicated(
    key: string,
    options: ClaimOptions,
    { counted, args, nonce } = this.#claimCall(options),
    written: WrittenSlot = {},
  ): Promise<ClaimReply> {
    for (let tries = 1; ; tries++) {
      const reply = await this.#sendClaim(key, args, nonce, options.retentionMs);
      if (isAcquired(reply)) written.claim = reply;
      let started: AcquiredReply | undefined;
      try {
        await this.#replicate('claim', key, CLAIM_WRITES.has(reply.outcome));
        if (!counted || !isAcquired(reply)) return reply;
        started = await this.#startReserved(key, reply, options);
      } catch (error) {
        if (!isAcquired(reply)) throw error;
        if (!(error instanceof ReplicationTimeoutError)) throw withWrittenClaim(error, reply);
        // Redis answered: the claim is on the primary, not on enough replicas. Nothing will run it.
        await this.#giveBackUnrun(key, reply, options.retentionMs);
        written.claim = undefined;
        throw error;
      }
      if (started) return started;
      // The reservation was taken over between its WAIT and its start (a WAIT longer than the lease): the
      // next claim says what the record is now.
      if (tries >= 3) {
        throw new StoreUnavailableError(`A replicated claim of ${key} was lost before it started, 3 times`);
      }
    }
  }

  /**
   * The claim script's arguments for `options` (checked here: throws `InvalidOptionError`) with a new
   * `nonce`, and whether the claim is `counted`: made as a reservation and counted after its `WAIT` (see
   * `#claimReplicated`).
   */
  #claimCall(options: ClaimOptions): { counted: boolean; args: (string | number)[]; nonce: string } {
    const counted = this.#wait !== undefined && options.reserve !== true;
    const nonce = this.#owed.nonce();
    return {
      counted,
      args: scriptArgs.claim(counted ? { ...options, reserve: true } : options, nonce),
      nonce,
    };
  }

  /** Counts the attempt of a reservation made for a counted claim (`start`); `undefined` when it was lost. */
  async #startReserved(
    key: string,
    reply: AcquiredReply,
    options: ClaimOptions,
  ): Promise<AcquiredReply | undefined> {
    const args = scriptArgs.start(reply.fencingToken, options.leaseMs, options.retentionMs);
    const started = decodeStartReply(await this.#call('start', key, args));
    if (!started.ok) return undefined;
    return {
      ...reply,
      attempt: started.attempt,
      leaseExpiresAtMs: started.leaseExpiresAtMs,
      serverTimeMs: started.serverTimeMs,
      started: true,
    };
  }

  async claimMany(requests: readonly ClaimRequest[]): Promise<ClaimReply[]> {
    if (requests.length === 0) return [];
    if (this.#redis.isCluster) {
      // A Cluster pipeline must stay within one slot; concurrent calls are batched per node instead by
      // auto-pipelining, when the client enables it.
      // Every key and option is checked before the first claim is sent: a bad request claims nothing.
      const checked = requests.map((r) => ({ key: this.recordKey(r.id), call: this.#claimCall(r.options) }));
      const claims = checked.map((c, i) => ({ key: c.key, options: requests[i]!.options }));
      // What each key's claim wrote, given back with the rest when the batch fails (its own failure too).
      const written = checked.map((): WrittenSlot => ({}));
      return this.#wholeBatch(
        claims,
        await Promise.allSettled(
          checked.map((c, i) => this.#claimReplicated(c.key, claims[i]!.options, c.call, written[i])),
        ),
        written,
      );
    }
    // With waitForReplicas a counted claim is a reservation counted after the WAIT (see #claimReplicated).
    const calls = requests.map((r) => ({
      key: this.recordKey(r.id),
      ...this.#claimCall(r.options),
      options: r.options,
    }));
    const pipeline = this.#redis.pipeline();
    const method = this.#commands.claim;
    for (const c of calls) (pipeline as unknown as Record<string, DefinedScript>)[method]!(c.key, ...c.args);
    let results: Awaited<ReturnType<typeof pipeline.exec>>;
    try {
      results = await this.#sendChecked(this.#redis, undefined, () => pipeline.exec());
    } catch (error) {
      for (const c of calls) this.#unansweredClaim(error, c.key, c.nonce, c.options.retentionMs);
      throw error;
    }
    if (!results || results.length !== calls.length) {
      throw new UnexpectedReplyError(
        `The claim pipeline returned ${results?.length} replies for ${calls.length}`,
      );
    }
    const replies = await this.#wholeBatch(
      calls,
      results.map(([err, reply]): PromiseSettledResult<ClaimReply> => {
        if (err) return { status: 'rejected', reason: toStoreError(err) };
        try {
          return { status: 'fulfilled', value: decodeClaimReply(reply) };
        } catch (error) {
          return { status: 'rejected', reason: error };
        }
      }),
    );
    // What each claim wrote and holds, given back when a later step fails.
    const written = replies.map((claim): WrittenSlot => ({ claim }));
    try {
      // One WAIT covers every earlier write of the connection.
      await this.#replicate(
        'claim',
        calls[0]!.key,
        replies.some((r) => CLAIM_WRITES.has(r.outcome)),
      );
    } catch (error) {
      // Unacknowledged or unanswered, the WAIT leaves every claim of the batch written and nobody to run
      // it: given back, not left IN_PROGRESS until its lease lapsed (CONFLICT for the redelivered batch).
      await Promise.all(calls.map((c, i) => this.#giveBackWritten(c, written[i]!)));
      throw error;
    }
    if (!calls.some((c) => c.counted)) return replies;
    return this.#wholeBatch(
      calls,
      await Promise.allSettled(
        replies.map(async (reply, i) => {
          const c = calls[i]!;
          if (!c.counted || !isAcquired(reply)) return reply;
          return (
            (await this.#startReserved(c.key, reply, c.options)) ??
            this.#claimReplicated(c.key, c.options, undefined, written[i])
          );
        }),
      ),
      written,
    );
  }

  /**
   * The replies of a batch whose claims each settled on its own, in request order; or, when any of them
   * failed, the first failure, thrown after every claim of the batch was given back (`release` as never
   * started: no attempt spent, a stale claim leaves the record stale): the ones that succeeded, and the
   * ones a failed step had written (a reservation whose `start` failed, a claim whose `WAIT` failed). The
   * caller gets no reply, so it could not give them back: they held their keys IN_PROGRESS until their
   * lease lapsed, and the redelivered batch met CONFLICT on them (and an orphaned counted claim spent an
   * attempt, its next claim ACQUIRED_STALE). The failure thrown names no `writtenClaim` (it names no key
   * either): nothing is left for the caller. A give-back that fails leaves its claim to its lease.
   * @param written - per request, the claim a failed step had written and still held.
   */
  async #wholeBatch(
    claims: readonly { readonly key: string; readonly options: ClaimOptions }[],
    settled: readonly PromiseSettledResult<ClaimReply>[],
    written?: readonly WrittenSlot[],
  ): Promise<ClaimReply[]> {
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed === undefined) return settled.map((s) => (s as PromiseFulfilledResult<ClaimReply>).value);
    await Promise.all(
      settled.map((s, i) =>
        this.#giveBackWritten(
          claims[i]!,
          s.status === 'fulfilled' ? { claim: s.value } : (written?.[i] ?? {}),
        ),
      ),
    );
    throw withoutWrittenClaim(failed.reason);
  }

  /**
   * {@link RedisIdempotencyStore.#giveBackUnrun} of the claim `written` holds, if it holds one that took the
   * key; the slot is emptied first, so a claim is given back once.
   */
  async #giveBackWritten(
    call: { readonly key: string; readonly options: ClaimOptions },
    written: WrittenSlot,
  ): Promise<void> {
    const claim = claimToGiveBack(written.claim);
    if (claim === undefined) return;
    written.claim = undefined;
    await this.#giveBackUnrun(call.key, claim, call.options.retentionMs);
  }

  /**
   * Gives back a claim nobody will run (`release` with `unrunReleaseOptions`: no attempt spent, a stale
   * claim leaves the record stale), one try and without `WAIT`: never rejects; a give-back that fails
   * leaves the claim to its lease (then the next claim takes it without an attempt spent if it was a
   * reservation, as ACQUIRED_STALE with its attempt counted if it was counted). The store's own layer of
   * the give-back (store/unrun-release.ts): for claims its caller never sees (a replicated claim that timed
   * out, a failed `claimMany`), so there is no runner to report to and no store gate to wait for.
   */
  async #giveBackUnrun(key: string, claim: AcquiredReply | WrittenClaim, retentionMs: number): Promise<void> {
    const release = unrunReleaseOptions(claim, retentionMs);
    const args = scriptArgs.release(
      claim.fencingToken,
      release.retentionMs,
      release.abandoned,
      release.neverStarted,
    );
    await this.#call('release', key, args).catch((error: unknown) =>
      this.#owedRelease(error, key, claim.fencingToken, release),
    );
  }

  /**
   * A `release` failed with `error`: when Redis did not answer it (or was not asked: the client was not
   * connected), the store owes it and sends it once the client is connected (pending-releases.ts), fenced
   * by its token as before. Without it a give-back of an unrun claim, or the release abandoned of a
   * fail-open run, was lost, and the claim held its key until its lease lapsed. Replicas that did not
   * acknowledge it leave it applied.
   */
  #owedRelease(error: unknown, key: string, fencingToken: number, options: ReleaseOptions): void {
    if (!(error instanceof StoreUnavailableError)) return;
    this.#owed.add({
      key,
      retentionMs: options.retentionMs,
      fencingToken,
      abandoned: options.abandoned === true,
      neverStarted: options.neverStarted === true,
    });
  }

  async complete(
    id: RecordId,
    fencingToken: number,
    options: { retentionMs: number; result?: string },
  ): Promise<WriteReply> {
    const args = scriptArgs.complete(fencingToken, options.retentionMs, options.result);
    return this.#written('complete', id, args);
  }

  async release(id: RecordId, fencingToken: number, options: ReleaseOptions): Promise<WriteReply> {
    const args = scriptArgs.release(
      fencingToken,
      options.retentionMs,
      options.abandoned,
      options.neverStarted,
    );
    try {
      return await this.#written('release', id, args);
    } catch (error) {
      this.#owedRelease(error, this.recordKey(id), fencingToken, options);
      throw error;
    }
  }

  async fail(id: RecordId, fencingToken: number, options: FailOptions): Promise<WriteReply> {
    const args = scriptArgs.fail(fencingToken, options.retentionMs, options.error, options.abandoned);
    return this.#written('fail', id, args);
  }

  async extend(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<ExtendReply> {
    const args = scriptArgs.extend(fencingToken, options.leaseMs, options.retentionMs);
    return decodeExtendReply(await this.#call('extend', this.recordKey(id), args));
  }

  /** Runs a fenced write and, when it was applied, waits for the replicas (`waitForReplicas`). */
  async #written(operation: 'complete' | 'release' | 'fail', id: RecordId, args: (string | number)[]) {
    const key = this.recordKey(id);
    const reply = decodeWriteReply(operation, await this.#call(operation, key, args));
    if (this.#wait) await this.#replicate(operation, key, reply.ok);
    return reply;
  }

  /** After a write that matters, `WAIT`s for `waitForReplicas` (replica-wait.ts); a no-op without it. */
  async #replicate(operation: string, key: string, wrote: boolean): Promise<void> {
    if (this.#wait && wrote) {
      const wait = this.#wait;
      await this.#sendChecked(this.#redis, key, () => waitForReplicas(this.#redis, key, wait, operation));
    }
  }

  async start(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<StartReply> {
    const args = scriptArgs.start(fencingToken, options.leaseMs, options.retentionMs);
    return decodeStartReply(await this.#call('start', this.recordKey(id), args));
  }

  async markDeadLettered(id: RecordId, fencingToken: number): Promise<MarkDeadLetteredReply> {
    const args = scriptArgs.markDeadLettered(fencingToken);
    return decodeMarkDeadLetteredReply(await this.#call('markDeadLettered', this.recordKey(id), args));
  }

  async waitForOutcome(id: RecordId, options: ClaimOptions, wait: OutcomeWaitOptions): Promise<ClaimReply> {
    const key = this.recordKey(id);
    const notifications = this.#notifications;
    return waitForOutcome(
      () => this.#claimReplicated(key, options),
      notifications ? (wake) => notifications.listen(key, wake) : () => Promise.reject(new Error('off')),
      wait,
    );
  }

  async get(id: RecordId): Promise<IdempotencyRecord | null> {
    const key = this.recordKey(id);
    const [fields, ttlMs] = await this.#sendChecked(this.#redis, key, () =>
      Promise.all([this.#redis.hgetall(key), this.#redis.pttl(key)]),
    );
    if (!fields?.s) return null;
    const num = (v: string | undefined) => (v === undefined || v === '' ? undefined : Number(v));
    return {
      state: decodeState(fields.s),
      fencingToken: num(fields.t) ?? 0,
      // A completed record without `a` completed on its first attempt, since lua/complete.lua drops a = 1.
      attempt: num(fields.a) ?? (fields.s === 'C' ? 1 : 0),
      // p is base64 since 0.2, see lua/includes/fingerprint.lua. Records before hold f in hex.
      fingerprint: fields.p ? Buffer.from(fields.p, 'base64').toString('hex') : (fields.f ?? ''),
      leaseExpiresAtMs: fields.s === 'P' ? num(fields.e) : undefined,
      // No r means completed without a result. Records of versions before 0.2 hold h = '0' with r = ''.
      result: fields.s === 'C' && fields.h !== '0' ? fields.r : undefined,
      error: fields.s === 'F' ? fields.x : undefined,
      reserved: fields.s === 'P' && fields.v === '1',
      deadLettered: fields.s === 'F' && fields.d === '1',
      lapsed: fields.s === 'F' && fields.l === '1',
      abandoned: fields.b === '1',
      createdAtMs: num(fields.c) ?? 0,
      // Completed since 0.2, w is ms after the token's time, see lua/complete.lua. Before, u held the time.
      updatedAtMs:
        fields.s === 'C' && fields.w !== undefined && fields.t !== undefined
          ? Math.floor(Number(fields.t) / 1000) + Number(fields.w)
          : (num(fields.u) ?? 0),
      ttlMs,
    };
  }

  /**
   * Resolves when Redis answers and would take a write. It runs a script that may write and writes nothing,
   * on a Cluster on every master. `PING` would not do, since a full server or a read-only replica answers it
   * too. Script flags need Redis 7, as the scripts' `SPUBLISH` does. A server that refuses the probe itself,
   * through an ACL without `EVAL` or a proxy that routes scripts by key, is asked `PING` instead.
   * @throws {@link StoreUnavailableError} when Redis does not answer within `commandTimeoutMs`, or refuses
   *   writes with `OOM`, `READONLY`, `MISCONF`, `LOADING` or the like.
   */
  async ping(): Promise<void> {
    // A Cluster's claims fail on the slots of any master that cannot write, so each is asked. Before the
    // Cluster knows its masters, the Cluster client picks a node.
    const masters = masterConnections(this.#redis);
    if (masters.length === 0) await this.#probe(this.#redis);
    else await Promise.all(masters.map((node) => this.#probe(node)));
  }

  /** {@link RedisIdempotencyStore.ping} of one client, the write probe or else `PING`. */
  async #probe(client: RedisClient): Promise<void> {
    try {
      await this.#sendChecked(client, undefined, () => client.eval(WRITABLE_PROBE, 0));
    } catch (error) {
      if (!(error instanceof UnexpectedReplyError)) throw error;
      // The probe itself is refused for good, by an ACL without EVAL or a proxy that routes scripts by key.
      // Whether Redis answers is all that can be asked.
      await this.#sendChecked(client, undefined, () => client.ping());
    }
  }

  /**
   * Runs one script on one key, the only key it touches, mapping failures to typed errors. It is not sent
   * while the client is not connected ({@link ConnectionCheck}), and the give-backs of unanswered claims go
   * first.
   */
  #call(script: ScriptName, key: string, args: (string | number)[]): Promise<unknown> {
    const refused = this.#connection.refusal(key);
    if (refused !== undefined) return Promise.reject(refused);
    if (this.#owed.due) this.#sendOwed();
    const redis = this.#redis;
    const writes = this.#writes;
    const stream = (redis as { stream?: Partial<CorkableStream> }).stream;
    // With none of this store's calls in flight, one message at a time, the call leaves at once, since there
    // is nothing to share a write with. A client without a corkable socket, such as a stand-in, sends as is.
    const sent =
      writes && !this.#deadlines.idle && typeof stream?.cork === 'function'
        ? writes.send(stream as CorkableStream, () => evalScript(redis, script, key, args))
        : evalScript(redis, script, key, args);
    return this.#guard(sent);
  }

  /**
   * Sends a command that is not a script on one key (a pipeline, `WAIT`, a read, the probe) through `client`
   * (the store's, or a Cluster node's for the probe) as {@link RedisIdempotencyStore.#call} does: refused
   * while not connected, after the due give-backs, bounded by `commandTimeoutMs`, failures typed.
   */
  #sendChecked<T>(client: RedisClient, key: string | undefined, send: () => Promise<T>): Promise<T> {
    const refused =
      client === this.#redis ? this.#connection.refusal(key) : this.#connection.nodeRefusal(client);
    if (refused !== undefined) return Promise.reject(refused);
    if (this.#owed.due) this.#sendOwed();
    return this.#guard(send());
  }

  /** Bounds a call by `commandTimeoutMs` and maps every failure to a typed error. */
  #guard<T>(promise: Promise<T>): Promise<T> {
    return this.#deadlines.guard(promise, toStoreError);
  }

  /**
   * A release became due (pending-releases.ts): a new one is sent at once while the client is connected;
   * otherwise, and when one failed (`again`), it goes once the client is `ready` again or before the
   * store's next command, whichever comes first.
   */
  #releaseDue(again: boolean): void {
    // A client that reports no status (a stand-in) counts as connected.
    const status = this.#redis.status as string | undefined;
    if (!again && (status === 'ready' || status === undefined)) {
      this.#sendOwed();
      return;
    }
    if (this.#sendOnReady || typeof this.#redis.once !== 'function') return;
    this.#sendOnReady = true;
    this.#redis.once('ready', () => {
      this.#sendOnReady = false;
      if (this.#owed.due) this.#sendOwed();
    });
  }

  /**
   * Writes every release owed that is due, before the command the caller is about to send: by nonce
   * (lua/give-back.lua) or by token (lua/release.lua). One that Redis refuses with a transient error (a
   * failover's `READONLY`, `LOADING`) or does not answer is owed again; one answered any other way is done.
   * No timeout: its reply may come late, and it is written once per connection.
   */
  #sendOwed(): void {
    const redis = this.#redis;
    this.#owed.sendDue((owed: PendingRelease) => {
      const sent =
        'nonce' in owed
          ? evalScript(redis, 'giveBack', owed.key, scriptArgs.giveBack(owed.nonce, owed.retentionMs))
          : evalScript(
              redis,
              'release',
              owed.key,
              scriptArgs.release(owed.fencingToken, owed.retentionMs, owed.abandoned, owed.neverStarted),
            );
      return sent.then(
        () => undefined,
        (error: unknown) => {
          if (toStoreError(error) instanceof StoreUnavailableError) throw error;
        },
      );
    });
  }
}

/** Where a claim call notes the claim it wrote and still holds (`undefined`: none, or given back). */
interface WrittenSlot {
  claim?: ClaimReply | undefined;
}

/**
 * `error` naming the claim `reply` that was written before it (`StoreUnavailableError.writtenClaim`) when it
 * is a `StoreUnavailableError`; any other error as it is.
 */
function withWrittenClaim(error: unknown, reply: AcquiredReply): unknown {
  if (!(error instanceof StoreUnavailableError)) return error;
  return new StoreUnavailableError(error.message, {
    cause: error.cause ?? error,
    writtenClaim: { fencingToken: reply.fencingToken, outcome: reply.outcome },
  });
}

/** `error` without its `writtenClaim` (given back already), when it names one; any other error as it is. */
function withoutWrittenClaim(error: unknown): unknown {
  if (!(error instanceof StoreUnavailableError) || error.writtenClaim === undefined) return error;
  return new StoreUnavailableError(error.message, { cause: error.cause ?? error });
}

/** Whether a claim reply holds the key (the caller must run or give back its claim). */
function isAcquired(reply: ClaimReply): reply is AcquiredReply {
  return reply.outcome === 'ACQUIRED' || reply.outcome === 'ACQUIRED_STALE';
}

/** Claim outcomes after which the claim script has written the record. */
const CLAIM_WRITES = new Set<string>(['ACQUIRED', 'ACQUIRED_STALE', 'FAILED']);

/**
 * Whether a failed call was answered by Redis with an error reply (mapped by `toStoreError`): the script
 * did not run, so it wrote nothing.
 */
function answeredWithError(error: unknown): boolean {
  return (error as { cause?: { name?: unknown } } | undefined)?.cause?.name === 'ReplyError';
}

/** Maps an ioredis failure to `StoreUnavailableError` (transient) or `UnexpectedReplyError` (a bug). @internal */
export function toStoreError(err: unknown): Error {
  if (isIdempotencyError(err)) return err;
  const e = err as { name?: string; message?: string };
  const message = e?.message ?? String(err);
  if (e?.name === 'ReplyError' && !TRANSIENT_REPLY.test(message)) {
    return new UnexpectedReplyError(`Redis refused a script call: ${message}`, { cause: err });
  }
  const hint = message.startsWith('OOM')
    ? ' (it reached maxmemory and evicts nothing: free memory, raise maxmemory or shorten retentionMs)'
    : '';
  return new StoreUnavailableError(`Redis is unavailable: ${message}${hint}`, { cause: err });
}
