import {
  type BatchResultErrorEntry,
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
} from '@aws-sdk/client-sqs';
import { SqsOperationError } from './errors';
import { abortableBy, type SqsClientLike } from './sqs-client';

/** SQS accepts at most 10 entries per batch request. */
export const MAX_SQS_BATCH_ENTRIES = 10;

/** The answer of one batch request: which entry ids succeeded and which failed. */
export interface BatchAnswer {
  readonly successful: readonly string[];
  readonly failed: readonly BatchResultErrorEntry[];
}

interface Pending<E> {
  readonly entry: E;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Collects entries for an SQS batch operation (`DeleteMessageBatch`, `ChangeMessageVisibilityBatch`) and
 * sends them 10 at a time: at once when 10 are waiting, else `windowMs` after the first one arrived. Each
 * `add` resolves when SQS reported its entry in `Successful`, and rejects with an {@link SqsOperationError}
 * when the entry is in `Failed` (checked even when the request itself succeeded, as SQS reports per-entry
 * failures with HTTP 200), or missing from both lists, or when the whole request failed.
 */
export class SqsBatcher<E> {
  #pending: Pending<E>[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #inFlight = new Set<Promise<void>>();

  constructor(
    private readonly operation: string,
    private readonly send: (entries: readonly (E & { Id: string })[]) => Promise<BatchAnswer>,
    private readonly windowMs: number,
  ) {}

  /** Queues one entry; see the class description for when the promise settles. */
  add(entry: E): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#pending.push({ entry, resolve, reject });
      if (this.#pending.length >= MAX_SQS_BATCH_ENTRIES) this.#flush();
      else if (!this.#timer) this.#timer = setTimeout(() => this.#flush(), this.windowMs);
    });
  }

  /** Sends everything queued now and waits for every request in flight. */
  async drain(): Promise<void> {
    while (this.#pending.length > 0 || this.#inFlight.size > 0) {
      this.#flush();
      await Promise.allSettled([...this.#inFlight]);
    }
  }

  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#pending.length > 0) {
      const batch = this.#pending.splice(0, MAX_SQS_BATCH_ENTRIES);
      const request = this.#sendBatch(batch).finally(() => this.#inFlight.delete(request));
      this.#inFlight.add(request);
    }
  }

  async #sendBatch(batch: Pending<E>[]): Promise<void> {
    const entries = batch.map((p, i) => ({ ...p.entry, Id: `e${i}` }));
    let answer: BatchAnswer;
    try {
      answer = await this.send(entries);
    } catch (error) {
      const wrapped = new SqsOperationError(`${this.operation} failed: ${(error as Error)?.message}`, {
        cause: error,
      });
      for (const p of batch) p.reject(wrapped);
      return;
    }
    const ok = new Set(answer.successful);
    const failed = new Map(answer.failed.map((f) => [f.Id, f]));
    for (const [i, p] of batch.entries()) {
      const id = `e${i}`;
      const failure = failed.get(id);
      if (failure) {
        p.reject(
          new SqsOperationError(
            `${this.operation} entry failed: ${failure.Code ?? 'unknown'}${failure.Message ? ` (${failure.Message})` : ''}`,
            { sqsCode: failure.Code, senderFault: failure.SenderFault },
          ),
        );
      } else if (ok.has(id)) p.resolve();
      else
        p.reject(
          new SqsOperationError(`${this.operation}: SQS reported neither success nor failure for ${id}`),
        );
    }
  }
}

/**
 * A `DeleteMessageBatch` batcher for one queue. `signal` aborts its requests (in flight and later ones):
 * their entries then reject, and their messages are not deleted.
 */
export function deleteBatcher(
  sqs: SqsClientLike,
  queueUrl: string,
  windowMs: number,
  signal?: AbortSignal,
): SqsBatcher<{ ReceiptHandle: string }> {
  return new SqsBatcher(
    'DeleteMessageBatch',
    async (entries) => {
      const out = await sqs.send(
        new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: [...entries] }),
        abortableBy(signal),
      );
      return { successful: (out.Successful ?? []).map((s) => s.Id ?? ''), failed: out.Failed ?? [] };
    },
    windowMs,
  );
}

/**
 * A `ChangeMessageVisibilityBatch` batcher for one queue. `signal` aborts its requests (in flight and
 * later ones): their entries then reject.
 */
export function visibilityBatcher(
  sqs: SqsClientLike,
  queueUrl: string,
  windowMs: number,
  signal?: AbortSignal,
): SqsBatcher<{ ReceiptHandle: string; VisibilityTimeout: number }> {
  return new SqsBatcher(
    'ChangeMessageVisibilityBatch',
    async (entries) => {
      const out = await sqs.send(
        new ChangeMessageVisibilityBatchCommand({ QueueUrl: queueUrl, Entries: [...entries] }),
        abortableBy(signal),
      );
      return { successful: (out.Successful ?? []).map((s) => s.Id ?? ''), failed: out.Failed ?? [] };
    },
    windowMs,
  );
}
