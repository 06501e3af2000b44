import { describeError } from '@idempotent-consumer/core';
import { NO_CLAIM_OUTCOME } from '@idempotent-consumer/core/kit';
import type { ConsumeMessage, Options } from 'amqplib';
import type { Decision } from './decide';
import type { MessageSubject } from './events';
import { DEAD_LETTER_HEADERS, PUBLISH_ID_HEADER, RETRY_HEADERS } from './headers';

type Headers = Record<string, unknown>;

/** Sets header `name` to `value`, or removes it (an original's) when `value` is undefined. */
function setOrDelete(headers: Headers, name: string, value: unknown): void {
  if (value !== undefined) headers[name] = value;
  else delete headers[name];
}

/** The original's headers with the attempt and outcome of this delivery, without the last publish id. */
function baseHeaders(message: ConsumeMessage, subject: MessageSubject, attempt: number): Headers {
  const headers: Headers = {
    ...(message.properties.headers as Headers | undefined),
    [RETRY_HEADERS.attempt]: attempt,
    [RETRY_HEADERS.outcome]: subject.outcome ?? NO_CLAIM_OUTCOME,
  };
  delete headers[PUBLISH_ID_HEADER];
  return headers;
}

/** The headers of a copy sent to a delay tier ({@link RETRY_HEADERS}). */
export function retryHeaders(
  message: ConsumeMessage,
  subject: MessageSubject,
  decision: Extract<Decision, { action: 'retry' }>,
): Headers {
  const headers = baseHeaders(message, subject, decision.attempt);
  headers[RETRY_HEADERS.reason] = decision.reason;
  headers[RETRY_HEADERS.delayMs] = decision.delayMs;
  setOrDelete(
    headers,
    RETRY_HEADERS.error,
    decision.error === undefined ? undefined : describeError(decision.error),
  );
  return headers;
}

/** The headers of a dead letter ({@link DEAD_LETTER_HEADERS}). */
export function deadLetterHeaders(
  message: ConsumeMessage,
  subject: MessageSubject,
  decision: Extract<Decision, { action: 'dead-letter' }>,
): Headers {
  const headers = baseHeaders(message, subject, decision.attempt);
  headers[DEAD_LETTER_HEADERS.reason] = decision.reason;
  headers[DEAD_LETTER_HEADERS.error] = decision.error;
  headers[DEAD_LETTER_HEADERS.scope] = subject.scope;
  setOrDelete(headers, DEAD_LETTER_HEADERS.key, subject.key);
  headers[DEAD_LETTER_HEADERS.originalQueue] = subject.source.queue;
  return headers;
}

/** The properties of a republished copy: the original's, without `expiration` and `userId`, with `headers`. */
export function republishOptions(message: ConsumeMessage, headers: Headers): Options.Publish {
  const p = message.properties;
  const options: Options.Publish = { headers };
  const copy = <K extends keyof Options.Publish>(key: K, value: Options.Publish[K] | undefined) => {
    if (value !== undefined && value !== null) options[key] = value;
  };
  copy('contentType', p.contentType);
  copy('contentEncoding', p.contentEncoding);
  copy('deliveryMode', p.deliveryMode);
  copy('priority', p.priority);
  copy('correlationId', p.correlationId);
  copy('replyTo', p.replyTo);
  copy('messageId', p.messageId);
  copy('timestamp', p.timestamp);
  copy('type', p.type);
  copy('appId', p.appId);
  return options;
}
