import type { Message } from '@aws-sdk/client-sqs';
import type { Prepared } from '@idempotent-consumer/core/kit';
import { messageGroupId } from './message-attributes';
import type { SqsMessagePort } from './message-port';
import type { ProcessedMessage } from './processed';
import { sqsRequestOf } from './report';

/**
 * Processes one received batch:
 * 1. claims the batch in one round trip (`Idempotency.claimMany`, attempts counted at once:
 *    `SqsMessagePort.claimBatch`): every message of a standard queue, and the first message of each
 *    message group of a FIFO queue;
 * 2. runs standard messages concurrently, and the messages of one FIFO group one after another in the order
 *    SQS returned them; once a group's message does not finish (retry, conflict, store down), the rest of
 *    that group in this batch is not run and is made visible again (`fifo-blocked`), so SQS redelivers the
 *    group in order (a FIFO group stays locked while an earlier message of it is in flight); once the
 *    processor is stopping (`SqsMessagePort.stopping`), no further handler starts: a message whose
 *    turn comes then is made visible again (`stopping`), the batch claim's claim for it given back;
 * 3. calls `onProcessed` for each message as soon as its decision is known (the poller deletes it then).
 *
 * When the store does not answer the batch claim, nothing runs and every message is left invisible
 * (`store-unavailable`, with the store's error). Resolves with the processed messages in the order received (none for a message `abandoned` says
 * `stop()` gave up on before its turn came; its claim from the batch claim, if any, is given back without an attempt spent; one
 * abandoned later, before its handler started, is given back by `process()`).
 */
export async function processBatch<T>(
  port: SqsMessagePort<T>,
  messages: readonly Message[],
  onProcessed: (processed: ProcessedMessage<T>) => Promise<void> | void,
  abandoned: (message: Message) => boolean = () => false,
): Promise<ProcessedMessage<T>[]> {
  type Entry = { readonly message: Message; readonly prepared: Prepared };
  const chains: Entry[][] = [];
  const groups = new Map<string, Entry[]>();
  for (const message of messages) {
    const entry = { message, prepared: port.prepare(message) };
    const group = messageGroupId(message);
    let chain = group === undefined ? undefined : groups.get(group);
    if (!chain) {
      chain = [];
      if (group !== undefined) groups.set(group, chain);
      chains.push(chain);
    }
    chain.push(entry);
  }
  const results = new Map<Message, ProcessedMessage<T>>();
  const claims = await port.claimBatch(chains.map((c) => c[0]!.prepared));
  const claimOf = (chain: number, i: number) =>
    i === 0 && Array.isArray(claims) ? claims[chain] : undefined;
  await Promise.all(
    chains.map(async (chain, c) => {
      let blocked = false;
      for (const [i, { message, prepared }] of chain.entries()) {
        if (abandoned(message)) {
          // `stop()` gave up on it: nothing more starts, and its claim from the batch claim is given back,
          // or its redelivery would meet a CONFLICT until the lease lapsed.
          await port.giveBack(message, prepared, claimOf(c, i));
          return;
        }
        let processed: ProcessedMessage<T>;
        if (claims && !Array.isArray(claims)) processed = port.notRun(message, prepared, claims);
        else if (blocked) processed = port.notRun(message, prepared, 'fifo-blocked');
        else if (port.stopping) {
          // The consumer is stopping before its turn came: it does not start, its claim is given back (no
          // attempt spent), and it is made visible again at once.
          await port.giveBack(message, prepared, claimOf(c, i));
          processed = port.notRun(message, prepared, 'stopping');
        } else processed = await port.process(message, prepared, claimOf(c, i));
        if (sqsRequestOf(processed) !== 'delete') blocked = true;
        results.set(message, processed);
        await onProcessed(processed);
      }
    }),
  );
  return messages.flatMap((m) => results.get(m) ?? []);
}
