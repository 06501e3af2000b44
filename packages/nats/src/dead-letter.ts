import type { RunOutcome } from '@idempotent-consumer/core';
import { DEAD_LETTER_FIELDS, type DeadLetterDecision, NO_CLAIM_OUTCOME } from '@idempotent-consumer/core/kit';
import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import { headers } from '@nats-io/nats-core';
import { MSG_ID_HEADER } from './options';

/** The headers of a dead letter: the kit's `DEAD_LETTER_FIELDS` and where the message came from. */
export const DEAD_LETTER_HEADERS = {
  ...DEAD_LETTER_FIELDS,
  /** The stream the message was in. */
  stream: 'x-original-stream',
  /** The subject it was published to. */
  subject: 'x-original-subject',
  /** Its sequence number in that stream, decimal. */
  sequence: 'x-original-sequence',
} as const;

/** Where dead letters go: the subject, and the stream `start()` found capturing it. */
export interface DeadLetterTarget {
  readonly subject: string;
  readonly stream: string;
}

/**
 * Publishes a copy of `message` (its data and headers, `Nats-Msg-Id` left out) with the dead-letter
 * headers, and resolves once the dead-letter stream stored it. The copy's own `Nats-Msg-Id` is the
 * original's stream and sequence, so a copy sent twice is stored once within the duplicate window.
 * @throws the JetStream client's error when the publish is not acknowledged.
 */
export async function publishDeadLetter(
  jetstream: JetStreamClient,
  target: DeadLetterTarget,
  message: JsMsg,
  decision: DeadLetterDecision,
  record: {
    readonly scope: string;
    readonly key: string | undefined;
    readonly outcome: RunOutcome | undefined;
  },
): Promise<void> {
  const copy = headers();
  for (const [name, values] of message.headers ?? []) {
    if (name !== MSG_ID_HEADER) for (const value of values) copy.append(name, value);
  }
  // Header values cannot hold line breaks.
  const set = (name: string, value: string) => copy.set(name, value.replace(/[\r\n]+/g, ' '));
  set(DEAD_LETTER_HEADERS.reason, decision.reason);
  set(DEAD_LETTER_HEADERS.outcome, record.outcome ?? NO_CLAIM_OUTCOME);
  set(DEAD_LETTER_HEADERS.error, decision.error);
  set(DEAD_LETTER_HEADERS.attempt, String(decision.attempt));
  if (record.key !== undefined) set(DEAD_LETTER_HEADERS.key, record.key);
  set(DEAD_LETTER_HEADERS.scope, record.scope);
  set(DEAD_LETTER_HEADERS.stream, message.info.stream);
  set(DEAD_LETTER_HEADERS.subject, message.subject);
  set(DEAD_LETTER_HEADERS.sequence, String(message.seq));
  await jetstream.publish(target.subject, message.data, {
    headers: copy,
    msgID: `${message.info.stream}/${message.seq}`,
    expect: { streamName: target.stream },
  });
}
