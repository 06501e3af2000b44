import type { Message } from '@aws-sdk/client-sqs';
import { messageGroupId } from './message-attributes';
import type { KeyedMessage, SqsMessageProcessor } from './message-processor';
import type { ProcessedMessage } from './processed';
import { sqsRequestOf } from './report';

/**
 * Processes one received batch:
 * 1. claims the batch in one round trip (`Idempotency.claimMany`, attempts counted at once:
 *    `SqsMessageProcessor.claimBatch`): every message of a standard queue, and the first message of each
 *    message group of a FIFO queue;
 * 2. runs standard messages concurrently, and the messages of one FIFO group one after another in the order
 *    SQS returned them; once a group's message does not finish (retry, conflict, store down), the rest of
 *    that group in this batch is not run and is made visible again (`fifo-blocked`), so SQS redelivers the
 *    group in order (a FIFO group stays locked while an earlier message of it is in flight); once the
 *    processor is stopping (`SqsMessageProcessor.stopping`), no further handler starts: a message whose
 *    turn comes then is made visible again (`stopping`), the batch claim's claim for it given back;
 * 3. calls `onProcessed` for each message as soon as its decision is known (the poller deletes it then).
 *
 * When the store does not answer the batch claim, nothing runs and every message is left invisible
 * (`store-unavailable`, with the store's error). Resolves with the processed messages in the order received (none for a message `abandoned` says
 * `stop()` gave up on before its turn came; its claim from the batch claim, if any, is given back without an attempt spent; one
 * abandoned later, before its handler started, is given back by `process()`).
 */
export async function processBatch<T>(
  processor: SqsMessageProcessor<T>,
  messages: readonly Message[],
  onProcessed: (processed: ProcessedMessage<T>) => Promise<void> | void,
  abandoned: (message: Message) => boolean = () => false,
): Promise<ProcessedMessage<T>[]> {
  const keyed = messages.map((m) => processor.keyed(m));
  const chains: KeyedMessage[][] = [];
  const groups = new Map<string, KeyedMessage[]>();
  for (const k of keyed) {
    const group = messageGroupId(k.message);
    if (group === undefined) {
      chains.push([k]);
      continue;
    }
    let chain = groups.get(group);
    if (!chain) {
      chain = [];
      groups.set(group, chain);
      chains.push(chain);
    }
    chain.push(k);
  }
  const results = new Map<Message, ProcessedMessage<T>>();
  const claims = await processor.claimBatch(chains.map((c) => c[0]!));
  await Promise.all(
    chains.map(async (chain) => {
      let blocked = false;
      for (const [i, k] of chain.entries()) {
        if (abandoned(k.message)) {
          // `stop()` gave up on it: nothing more starts, and the claim the batch claim made for it (the first
          // of its chain) is given back, or its redelivery would meet a CONFLICT until the lease lapsed.
          if (i === 0 && claims instanceof Map) await processor.giveBack(k, claims.get(k.message));
          return;
        }
        let processed: ProcessedMessage<T>;
        if (claims && !(claims instanceof Map)) processed = await processor.notRun(k, claims);
        else if (blocked) processed = await processor.notRun(k, 'fifo-blocked');
        else if (processor.stopping) {
          // The consumer is stopping before its turn came (a FIFO message waiting behind its group, a batch
          // claim answered after `stop()`): it does not start. The batch claim's claim is given back (no
          // attempt spent), and the message is made visible again at once.
          if (i === 0 && claims instanceof Map) await processor.giveBack(k, claims.get(k.message));
          processed = await processor.notRun(k, 'stopping');
        } else processed = await processor.process(k, i === 0 ? claims?.get(k.message) : undefined);
        if (sqsRequestOf(processed) !== 'delete') blocked = true;
        results.set(k.message, processed);
        await onProcessed(processed);
      }
    }),
  );
  return messages.flatMap((m) => results.get(m) ?? []);
}
