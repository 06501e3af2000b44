import type { Idempotency } from '@idempotent-consumer/core';
import { buildDeadLetter } from './dead-letter';
import type { Decision } from './decide';
import type { KafkaEventEmitter, MessageSubject } from './events';
import type { KafkaMessageLike, ProducerLike } from './types';

/**
 * Carries out a `dead-letter` decision: sends the message to the dead-letter topic (or only reports it
 * when `deadLetterTopic` is `false`); for a FAILED record, then marks it dead-lettered
 * (`Idempotency.markDeadLettered`), so a re-fetch of the message settles without another copy. A mark
 * that cannot be written is a `storeError` event (the copy may then be sent again on a re-fetch).
 */
export class DeadLetterSender {
  constructor(
    private readonly idempotency: Idempotency,
    private readonly producer: ProducerLike | undefined,
    private readonly topicOf: ((topic: string) => string) | false,
    private readonly events: KafkaEventEmitter,
  ) {}

  /**
   * @returns true once the copy is sent (or dead-lettering is off): the offset may resolve; false when the
   *   produce failed (a `brokerError` event): the message must stay unresolved.
   */
  async send(
    message: KafkaMessageLike,
    subject: MessageSubject,
    decision: Extract<Decision, { action: 'dead-letter' }>,
  ): Promise<boolean> {
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
        await this.producer!.send({ topic: destination, messages: [built] });
      } catch (error) {
        this.events.emit('brokerError', { operation: 'produce', error, source });
        return false;
      }
    }
    if (decision.failedFencingToken !== undefined && key !== undefined) {
      await this.idempotency
        .markDeadLettered({ scope, key }, { fencingToken: decision.failedFencingToken })
        .catch((error: unknown) =>
          this.events.emit('storeError', { operation: 'markDeadLettered', error, source }),
        );
    }
    this.events.emit('deadLettered', {
      ...subject,
      attempt: decision.attempt,
      reason: decision.reason,
      error: decision.error,
      destination,
    });
    return true;
  }
}
