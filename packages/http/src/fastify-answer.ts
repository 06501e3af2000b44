import type { FastifyReply } from 'fastify';
import type { FinishedResponse } from './admission';
import { withHeadersBefore } from './answer';
import type { InFlight } from './fastify-state';
import type { HttpAnswer } from './problem';
import type { OutgoingHeaders } from './stored-response';

/**
 * Finishes the claimed request with the handler's response and gives the reply what is sent: the
 * handler's `payload` under the status and headers it had, or the answer `finish` gave instead (500
 * `response-too-large`) under the headers the reply had when it was claimed and the answer's own, never
 * the handler's.
 */
export async function finishReply(
  reply: FastifyReply,
  state: InFlight,
  finished: FinishedResponse,
  payload: unknown,
): Promise<unknown> {
  const answer = await state.claimed.finish(finished);
  if (answer) setAnswer(reply, withHeadersBefore(state.headersBefore, answer));
  // Only a second answer dropped meanwhile may have changed them.
  else if (state.dropped || reply.statusCode !== finished.status) setAnswer(reply, finished);
  return answer ? answer.body : payload;
}

/**
 * Gives the reply the status and only the headers of `answer`: the stored answer replacing the handler's,
 * or the handler's as they were when it reached onSend (what was stored), which a second answer dropped
 * meanwhile (`reply.code(400).send(...)`) may have changed.
 */
export function setAnswer(reply: FastifyReply, answer: { status: number; headers: OutgoingHeaders }): void {
  for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
  setAnswerHeaders(reply.code(answer.status), answer);
}

/** Sends an answer given before the handler ran (a replay or a problem). */
export function sendAnswer(reply: FastifyReply, answer: HttpAnswer): FastifyReply {
  return setAnswerHeaders(reply.code(answer.status), answer).send(answer.body);
}

/** Sets an answer's headers on the reply; a multi-valued one (`Set-Cookie`) goes out as several lines. */
function setAnswerHeaders(reply: FastifyReply, answer: { headers: OutgoingHeaders }): FastifyReply {
  for (const [name, value] of Object.entries(answer.headers))
    if (value !== undefined) reply.header(name, typeof value === 'object' ? [...value] : value);
  return reply;
}
