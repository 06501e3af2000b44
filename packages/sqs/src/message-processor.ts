import type { Message } from '@aws-sdk/client-sqs';
import {
  type AcquiredReply,
  type ClaimReply,
  computeBackoffMs,
  type DeadLetterReason,
  deadLetterReasonOf,
  type HandlerContext,
  InvalidKeyError,
  MissingKeyError,
  type RunOptions,
  type RunRequest,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { sendToDeadLetterQueue } from './dead-letter';
import type { MessageDisposition, ProcessedMessage } from './disposition';
import { receiveCount, toVisibilitySeconds } from './message-attributes';
import type { ResolvedSqsIdempotencyOptions, SqsMessageHandler } from './options';
import type { SqsDependencies } from './sqs-client';

/** What a {@link SqsMessageProcessor} needs from the form that runs it (poller or sqs-consumer wrapper). */
export interface ProcessorHooks {
  /** Sets a message's visibility timeout (lease heartbeats). Must not reject: it reports its own errors. */
  changeVisibility(message: Message, visibilityTimeoutSeconds: number): Promise<void>;
  /** Runs after a claim was acquired, before the handler (the poller extends a visibility about to lapse). */
  beforeExecute?(message: Message, leaseMs: number): Promise<void>;
  /** An SQS or unexpected error that does not stop processing. */
  onError(error: unknown, message: Message): void;
}

/** A message with its idempotency request, or the reason it has none. */
export type KeyedMessage =
  | { readonly message: Message; readonly request: RunRequest }
  | { readonly message: Message; readonly request: undefined; readonly error?: unknown };

type Base<T> = Omit<ProcessedMessage<T>, 'disposition' | 'storeUnavailable'> & { storeUnavailable?: boolean };

/**
 * The outcome → SQS action mapping of DESIGN.md (SQS column), shared by both forms: claims a message (or
 * takes a claim made for its batch), runs the handler under the lease, records how it ended, and decides
 * the message's {@link MessageDisposition}. It sends only what it must itself: dead-letter copies and
 * heartbeat visibility changes (through the hooks); deletes and the final visibility change are the
 * caller's, so the poller can batch them and sqs-consumer can delete what the wrapper returns.
 * `process` never rejects.
 */
export class SqsMessageProcessor<T> {
  readonly #deps: SqsDependencies;
  readonly #options: ResolvedSqsIdempotencyOptions;
  readonly #handler: SqsMessageHandler<T>;
  readonly #hooks: ProcessorHooks;

  constructor(
    dependencies: SqsDependencies,
    options: ResolvedSqsIdempotencyOptions,
    handler: SqsMessageHandler<T>,
    hooks: ProcessorHooks,
  ) {
    this.#deps = dependencies;
    this.#options = options;
    this.#handler = handler;
    this.#hooks = hooks;
  }

  /** The per-call overrides passed to the runner. */
  get runOptions(): RunOptions {
    const o: { leaseMs?: number; maxAttempts?: number } = {};
    if (this.#options.leaseMs !== undefined) o.leaseMs = this.#options.leaseMs;
    if (this.#options.maxAttempts !== undefined) o.maxAttempts = this.#options.maxAttempts;
    return o;
  }

  /** The lease of these messages, in milliseconds. */
  get leaseMs(): number {
    return this.#options.leaseMs ?? this.#deps.idempotency.options.leaseMs;
  }

  /** The idempotency request of a message, or `request: undefined` when it has no key. */
  keyed(message: Message): KeyedMessage {
    let key: string | undefined;
    try {
      key = this.#options.idempotencyKey(message);
    } catch (error) {
      return { message, request: undefined, error };
    }
    if (key === undefined || key === '') return { message, request: undefined };
    const payload = this.#options.payload(message);
    return {
      message,
      request:
        payload === undefined
          ? { scope: this.#options.scope, key }
          : { scope: this.#options.scope, key, payload },
    };
  }

  /**
   * Claims the keyed messages of a batch in one round trip (`Idempotency.claimMany`). Resolves with one
   * reply per keyed message (in order), `'store-unavailable'` when the store did not answer, or `undefined`
   * when the batch cannot be claimed at once (an invalid key): each message is then claimed on its own.
   */
  async claimBatch(
    keyed: readonly KeyedMessage[],
  ): Promise<Map<Message, ClaimReply> | 'store-unavailable' | undefined> {
    const withKey = keyed.filter((k): k is KeyedMessage & { request: RunRequest } => k.request !== undefined);
    if (withKey.length === 0) return new Map();
    try {
      const replies = await this.#deps.idempotency.claimMany(
        withKey.map((k) => k.request),
        this.runOptions,
      );
      return new Map(withKey.map((k, i) => [k.message, replies[i]!]));
    } catch (error) {
      if (
        error instanceof StoreUnavailableError &&
        this.#deps.idempotency.options.storeFailureMode === 'closed'
      ) {
        return 'store-unavailable';
      }
      return undefined;
    }
  }

  /** Processes one message (see the class description). `claimed`: the reply of a batch claim. */
  async process(keyed: KeyedMessage, claimed?: ClaimReply): Promise<ProcessedMessage<T>> {
    const { message } = keyed;
    try {
      if (!keyed.request) return await this.#withoutKey(keyed);
      const request = keyed.request;
      let reply = claimed;
      if (!reply) {
        try {
          reply = await this.#deps.idempotency.claim(request, this.runOptions);
        } catch (error) {
          return await this.#claimFailed(message, request, error);
        }
      }
      const base = { message, key: request.key, outcome: reply.outcome };
      switch (reply.outcome) {
        case 'ACQUIRED':
        case 'ACQUIRED_STALE':
          return await this.#execute(message, request, reply);
        case 'DUPLICATE': {
          const settled = this.#deps.idempotency.settle<T>(reply);
          const result = settled.outcome === 'DUPLICATE' ? settled.result : undefined;
          return done({ ...base, handler: 'not-run', result }, { action: 'delete', reason: 'duplicate' });
        }
        case 'CONFLICT':
          return done(
            { ...base, handler: 'not-run' },
            {
              action: 'change-visibility',
              reason: 'conflict',
              visibilityTimeoutSeconds: Math.max(1, toVisibilitySeconds(reply.remainingLeaseMs)),
            },
          );
        case 'PAYLOAD_MISMATCH':
        case 'FAILED':
          return await this.#deadLetter(
            { ...base, handler: 'not-run' },
            deadLetterReasonOf(reply)!,
            reply.outcome === 'FAILED' ? reply.error : undefined,
            reply.attempt,
          );
      }
    } catch (error) {
      this.#hooks.onError(error, message);
      return done(
        { message, key: keyed.request?.key, outcome: undefined, handler: 'not-run', error },
        { action: 'leave', reason: 'error' },
      );
    }
  }

  /** The visibility timeout of a retry, from the message's `ApproximateReceiveCount`, in seconds. */
  retryVisibilitySeconds(message: Message): number {
    return toVisibilitySeconds(computeBackoffMs(receiveCount(message), this.#options.retryBackoff));
  }

  async #execute(message: Message, request: RunRequest, reply: AcquiredReply): Promise<ProcessedMessage<T>> {
    const leaseMs = this.leaseMs;
    await this.#hooks.beforeExecute?.(message, leaseMs);
    const extend = this.#options.extendVisibility;
    const result = await this.#deps.idempotency.execute<T>(
      request,
      reply,
      (context) => this.#handler(message, context),
      {
        ...this.runOptions,
        // Not awaited: the lease keeper awaits its callback, and `execute` awaits the keeper before it
        // writes COMPLETED, so an awaited SQS call would widen the window between the handler's side effect
        // and its record. The hook reports its own errors.
        onHeartbeat: extend
          ? (info) => {
              void this.#hooks.changeVisibility(
                message,
                Math.max(1, toVisibilitySeconds(info.leaseExpiresAtMs - info.serverTimeMs)),
              );
            }
          : undefined,
      },
    );
    const base = { message, key: request.key, outcome: reply.outcome };
    switch (result.status) {
      case 'completed':
        return done(
          { ...base, handler: 'completed', result: result.result, storeUnavailable: !result.recorded },
          { action: 'delete', reason: 'completed' },
        );
      case 'released':
        return done(
          { ...base, handler: 'threw', error: result.error, storeUnavailable: !result.recorded },
          {
            action: 'change-visibility',
            reason: 'retry',
            visibilityTimeoutSeconds: this.retryVisibilitySeconds(message),
          },
        );
      case 'failed':
        return this.#deadLetter(
          { ...base, handler: 'threw', storeUnavailable: !result.recorded },
          deadLetterReasonOf(result)!,
          result.error,
          result.attempt,
        );
      case 'lease-lost':
        return done(
          {
            ...base,
            handler: result.handlerCompleted ? 'completed' : 'threw',
            result: result.result,
            error: result.error,
          },
          { action: 'leave', reason: 'lease-lost' },
        );
    }
  }

  async #claimFailed(message: Message, request: RunRequest, error: unknown): Promise<ProcessedMessage<T>> {
    const base = { message, key: request.key, outcome: undefined, handler: 'not-run' as const, error };
    if (error instanceof StoreUnavailableError) {
      if (this.#deps.idempotency.options.storeFailureMode === 'open') {
        this.#deps.idempotency.emit('failOpen', { scope: request.scope, key: request.key, error });
        return this.#runUnprotected(message, request.key);
      }
      return done({ ...base, storeUnavailable: true }, { action: 'leave', reason: 'store-unavailable' });
    }
    if (error instanceof InvalidKeyError) return this.#deadLetter(base, 'invalid-key', error, 0);
    this.#hooks.onError(error, message);
    return done(base, { action: 'leave', reason: 'error' });
  }

  async #withoutKey(keyed: KeyedMessage): Promise<ProcessedMessage<T>> {
    const { message } = keyed;
    if ('error' in keyed && keyed.error !== undefined) {
      // The caller's extractor threw: a bug on our caller's side, not a property of this message.
      this.#hooks.onError(keyed.error, message);
      return done(
        { message, key: undefined, outcome: undefined, handler: 'not-run', error: keyed.error },
        { action: 'leave', reason: 'error' },
      );
    }
    if (this.#options.onMissingKey === 'process') return this.#runUnprotected(message, undefined);
    const error = new MissingKeyError(
      `SQS message ${message.MessageId ?? '(no MessageId)'} has no idempotency key (scope ${this.#options.scope})`,
    );
    return this.#deadLetter(
      { message, key: undefined, outcome: undefined, handler: 'not-run' },
      'missing-key',
      error,
      0,
    );
  }

  async #runUnprotected(message: Message, key: string | undefined): Promise<ProcessedMessage<T>> {
    const context: HandlerContext = {
      scope: this.#options.scope,
      key: key ?? '',
      fencingToken: 0,
      attempt: 0,
      outcome: 'UNPROTECTED',
      signal: new AbortController().signal,
    };
    const base = { message, key, outcome: 'UNPROTECTED' as const };
    try {
      const result = await this.#handler(message, context);
      return done({ ...base, handler: 'completed', result }, { action: 'delete', reason: 'unprotected' });
    } catch (error) {
      return done(
        { ...base, handler: 'threw', error },
        {
          action: 'change-visibility',
          reason: 'retry',
          visibilityTimeoutSeconds: this.retryVisibilitySeconds(message),
        },
      );
    }
  }

  /**
   * Dead-letters a message: a copy to the dead-letter queue then a delete, or the redrive policy.
   * `attempt`: the record's attempt count, 0 when no claim was made.
   */
  async #deadLetter(
    base: Base<T>,
    reason: DeadLetterReason,
    error: unknown,
    attempt: number,
  ): Promise<ProcessedMessage<T>> {
    const target = this.#options.deadLetter;
    const withReason = { ...base, error: error ?? base.error, deadLetterReason: reason };
    if (target === 'redrive-policy') {
      return done(withReason, {
        action: 'change-visibility',
        reason: 'dead-letter-redrive',
        visibilityTimeoutSeconds: this.retryVisibilitySeconds(base.message),
      });
    }
    try {
      await sendToDeadLetterQueue(this.#deps.sqs, target.queueUrl, base.message, reason, error, {
        outcome: base.outcome,
        attempt,
        key: base.key,
        scope: this.#options.scope,
      });
    } catch (sendError) {
      this.#hooks.onError(sendError, base.message);
      return done({ ...withReason, error: sendError }, { action: 'leave', reason: 'dead-letter-failed' });
    }
    return done(withReason, { action: 'delete', reason: 'dead-lettered' });
  }
}

function done<T>(base: Base<T>, disposition: MessageDisposition): ProcessedMessage<T> {
  return { ...base, storeUnavailable: base.storeUnavailable ?? false, disposition };
}
