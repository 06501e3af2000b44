import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';

type Entry = { Id: string; ReceiptHandle: string; VisibilityTimeout?: number };

/**
 * A fake SQS client for unit tests: hands out prepared receive batches, records every call, and answers
 * batch requests with `Successful`/`Failed` as the test decides. Integration suites use the real emulator.
 */
export class FakeSqs {
  readonly batches: Message[][] = [];
  readonly deleted: string[] = [];
  readonly visibility: { receipt: string; seconds: number }[] = [];
  readonly sent: { queueUrl: string; body: string; attributes: Record<string, unknown> }[] = [];
  /** Receipt handles whose batch entries SQS reports in `Failed`. */
  readonly failReceipts = new Set<string>();
  receives = 0;
  /** When true, `DeleteMessageBatch` is never answered (a black-holed endpoint). */
  hangDeletes = false;
  /**
   * When true, `GetQueueAttributes` (the dead-letter check at start) is not answered until its request is
   * aborted (a black-holed endpoint); `attributeRequests` counts the requests, `attributeAborts` the
   * aborted ones.
   */
  hangQueueAttributes = false;
  attributeRequests = 0;
  attributeAborts = 0;
  /** How many of the next `SendMessage` calls (dead-letter copies) fail. */
  failSends = 0;
  /**
   * While set, a visibility change (`ChangeMessageVisibility`, `ChangeMessageVisibilityBatch`) sent is not
   * answered until it resolves (a slow SQS round trip); `heldVisibility` counts the requests it held.
   */
  holdVisibility: Promise<void> | undefined;
  heldVisibility = 0;
  /**
   * While set, a `DeleteMessageBatch` sent is not answered until it resolves (a slow SQS round trip);
   * `heldDeletes` counts the requests it held.
   */
  holdDeletes: Promise<void> | undefined;
  heldDeletes = 0;
  /**
   * Receipt handles a request (a visibility change or a delete) was sent for while an earlier visibility
   * change of the same receipt handle was still unanswered: the two may land in either order on SQS.
   */
  readonly overlapping: string[] = [];
  /** Visibility changes sent and not yet answered, by receipt handle. */
  readonly #unanswered = new Map<string, number>();
  /** The `RedrivePolicy` attribute `GetQueueAttributes` answers for every queue (`undefined`: none). */
  redrivePolicy: string | undefined = JSON.stringify({ deadLetterTargetArn: 'arn:dlq', maxReceiveCount: 5 });

  get client(): SQSClient {
    return this as unknown as SQSClient;
  }

  async send(command: unknown, options?: { abortSignal?: AbortSignal }): Promise<unknown> {
    if (command instanceof ReceiveMessageCommand) {
      this.receives += 1;
      const batch = this.batches.shift();
      if (batch) return { Messages: batch.map((m) => answered(m, command.input)) };
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 20);
        options?.abortSignal?.addEventListener('abort', () => {
          clearTimeout(t);
          resolve();
        });
      });
      if (options?.abortSignal?.aborted) throw Object.assign(new Error('aborted'), { name: 'AbortError' });
      return {};
    }
    if (command instanceof DeleteMessageBatchCommand) {
      this.#sent(command.input.Entries as Entry[], false);
      if (this.hangDeletes) return new Promise(() => {});
      await this.#held('Deletes');
      return this.#answer(command.input.Entries as Entry[], (e) => this.deleted.push(e.ReceiptHandle));
    }
    if (command instanceof ChangeMessageVisibilityBatchCommand) {
      const entries = command.input.Entries as Entry[];
      this.#sent(entries, true);
      await this.#held('Visibility');
      this.#answered(entries);
      return this.#answer(entries, (e) =>
        this.visibility.push({ receipt: e.ReceiptHandle, seconds: e.VisibilityTimeout! }),
      );
    }
    if (command instanceof ChangeMessageVisibilityCommand) {
      const entries = [{ Id: '', ReceiptHandle: command.input.ReceiptHandle! }];
      this.#sent(entries, true);
      await this.#held('Visibility');
      this.#answered(entries);
      this.visibility.push({
        receipt: command.input.ReceiptHandle!,
        seconds: command.input.VisibilityTimeout!,
      });
      return {};
    }
    if (command instanceof GetQueueAttributesCommand) {
      this.attributeRequests += 1;
      if (this.hangQueueAttributes) {
        await new Promise<void>((resolve) => {
          const signal = options?.abortSignal;
          if (signal?.aborted) resolve();
          signal?.addEventListener('abort', () => resolve(), { once: true });
        });
        this.attributeAborts += 1;
        throw Object.assign(new Error('Request aborted'), { name: 'AbortError' });
      }
      const url = command.input.QueueUrl!;
      return {
        Attributes: {
          QueueArn: `arn:${url}`,
          ...(this.redrivePolicy === undefined ? {} : { RedrivePolicy: this.redrivePolicy }),
        },
      };
    }
    if (command instanceof SendMessageCommand) {
      if (this.failSends > 0) {
        this.failSends -= 1;
        throw new Error('SQS refused the copy');
      }
      this.sent.push({
        queueUrl: command.input.QueueUrl!,
        body: command.input.MessageBody!,
        attributes: command.input.MessageAttributes ?? {},
      });
      return { MessageId: 'dlq-copy' };
    }
    throw new Error(`FakeSqs: unexpected ${(command as object).constructor.name}`);
  }

  /** Notes the entries of a request sent (see {@link FakeSqs.overlapping}); `visibility`: a visibility change. */
  #sent(entries: readonly Entry[], visibility: boolean): void {
    for (const e of entries) {
      if ((this.#unanswered.get(e.ReceiptHandle) ?? 0) > 0) this.overlapping.push(e.ReceiptHandle);
    }
    if (!visibility) return;
    for (const e of entries)
      this.#unanswered.set(e.ReceiptHandle, (this.#unanswered.get(e.ReceiptHandle) ?? 0) + 1);
  }

  /** The visibility change of `entries` is answered. */
  #answered(entries: readonly Entry[]): void {
    for (const e of entries)
      this.#unanswered.set(e.ReceiptHandle, this.#unanswered.get(e.ReceiptHandle)! - 1);
  }

  /** Waits for `hold${requests}` when set, counting the request in `held${requests}`. */
  async #held(requests: 'Visibility' | 'Deletes'): Promise<void> {
    const hold = this[`hold${requests}`];
    if (!hold) return;
    this[`held${requests}`] += 1;
    await hold;
  }

  #answer(entries: Entry[], ok: (e: Entry) => void) {
    const Successful: { Id: string }[] = [];
    const Failed: { Id: string; Code: string; SenderFault: boolean }[] = [];
    for (const e of entries) {
      if (this.failReceipts.has(e.ReceiptHandle)) {
        Failed.push({ Id: e.Id, Code: 'ReceiptHandleIsInvalid', SenderFault: true });
      } else {
        ok(e);
        Successful.push({ Id: e.Id });
      }
    }
    return { Successful, Failed };
  }
}

let n = 0;
/** A received message: `key` as the `idempotency-key` attribute, optional group and receive count. */
export function message(
  body: string,
  options: { key?: string; group?: string; receiveCount?: number } = {},
): Message {
  n += 1;
  return {
    MessageId: `m-${n}`,
    ReceiptHandle: `r-${n}`,
    Body: body,
    MessageAttributes: options.key
      ? { 'idempotency-key': { DataType: 'String', StringValue: options.key } }
      : undefined,
    Attributes: {
      ApproximateReceiveCount: String(options.receiveCount ?? 1),
      ...(options.group ? { MessageGroupId: options.group } : {}),
    },
  };
}

/**
 * A received message as SQS answers it: only the system attributes and message attributes the receive asked
 * for (`All` for every one), so a poller that stops asking for one sees it missing, as it would on SQS. The
 * message object itself is returned (trimmed in place), so tests can find it by identity.
 */
function answered(message: Message, input: ReceiveMessageCommand['input']): Message {
  const pick = <V>(all: Record<string, V> | undefined, asked: readonly string[] | undefined) => {
    if (all === undefined) return undefined;
    const names = asked ?? [];
    return Object.fromEntries(
      Object.entries(all).filter(([name]) => names.includes('All') || names.includes(name)),
    );
  };
  message.Attributes = pick(message.Attributes, input.MessageSystemAttributeNames);
  message.MessageAttributes = pick(message.MessageAttributes, input.MessageAttributeNames);
  return message;
}
