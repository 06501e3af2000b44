import { StopSignal } from '@idempotent-consumer/core/kit';
import { buildDeadLetter } from './dead-letter';
import type { Decision } from './decide';
import type { KafkaEventEmitter, MessageSubject } from './events';
import type { KafkaMessageLike, ProducerLike } from './types';

/**
 * How {@link DeadLetterSender.send} ended: `sent` (or dead-lettering is off): the offset may resolve;
 * `failed`: the produce failed (a `brokerError` event); `stopped`: the wrapper was closed before the
 * broker answered. After `failed` or `stopped` the message must stay unresolved.
 */
export type DeadLetterSend = 'sent' | 'failed' | 'stopped';

/**
 * Carries out a `dead-letter` decision: sends the message to the dead-letter topic (or only reports it
 * when `deadLetterTopic` is `false`); for a FAILED record, then marks it dead-lettered
 * (`Idempotency.markDeadLettered`), so a re-fetch of the message settles without another copy. A mark
 * that cannot be written is a `storeError` event (the copy may then be sent again on a re-fetch).
 * The wrapper's `close()` (`stopping`) ends the wait for the produce: a broker that does not answer would
 * otherwise hold the message, and KafkaJS's disconnect, for the producer's request timeout and retries.
 */
export class DeadLetterSender {
  constructor(
    private readonly producer: ProducerLike | undefined,
    private readonly topicOf: ((topic: string) => string) | false,
    private readonly events: KafkaEventEmitter,
    private readonly stopping: AbortSignal,
  ) {}

  /**
   * Sends the copy, marks the record, emits `deadLettered`. Once the wrapper is closed no produce starts,
   * and one in flight is no longer waited for (it is left to end on its own; the copy may still land, and
   * the message's re-fetch sends another: dead-letter consumers dedupe on `x-idempotency-key`).
   */
  async send(
    message: KafkaMessageLike,
    subject: MessageSubject,
    decision: Extract<Decision, { action: 'dead-letter' }>,
    markDeadLettered: () => Promise<void>,
  ): Promise<DeadLetterSend> {
    const { source, scope, key, outcome } = subject;
    const destination = this.topicOf ? this.topicOf(source.topic) : null;
    if (destination !== null) {
      try {
        const built = buildDeadLetter({
          topic: source.topic,
          partition: source.partition,
          message,
          reason: decision.reason,
          outcome,
          error: decision.error,
          attempt: decision.attempt,
          scope,
          key,
        });
        if (this.stopping.aborted) return 'stopped';
        const sent = this.producer!.send({ topic: destination, messages: [built] });
        if ((await StopSignal.unless(sent, this.stopping)).aborted) return 'stopped';
      } catch (error) {
        this.events.emit('brokerError', { operation: 'produce', error, source });
        return 'failed';
      }
    }
    await markDeadLettered();
    this.events.emit('deadLettered', {
      ...subject,
      attempt: decision.attempt,
      reason: decision.reason,
      error: decision.error,
      destination,
    });
    return 'sent';
  }
}
