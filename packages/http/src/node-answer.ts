import type { ServerResponse } from 'node:http';
import { headersBefore, replaceHeaders, withHeadersBefore } from './answer';
import type { HttpAnswer } from './problem';

/**
 * Sends an answer given before the handler ran (a replay or a problem) on a Node response. Headers set
 * by middleware before this one (CORS, security headers, a request id) stay, as on every binding: a
 * browser retrying cross-origin must be able to read its replay. The answer's own headers replace any of
 * the same name.
 */
export function sendNodeAnswer(res: ServerResponse, answer: HttpAnswer): void {
  res.statusCode = answer.status;
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  res.end(answer.body);
}

type End = (...args: unknown[]) => ServerResponse;

/**
 * Sends `answer` in place of what a framework writes next on `res`: its `writeHead` and `write` are
 * dropped, and at its `end` the answer goes out, with the headers `res` has now (set by middleware and
 * the framework before the handler: CORS, a route's declared headers) under the answer's own. For a
 * framework that sends the handler's value itself (NestJS): the value it sends for a request answered
 * before its handler is never seen.
 */
export function answerInstead(res: ServerResponse, answer: HttpAnswer): void {
  const before = headersBefore(res.getHeaders());
  const { writeHead, write, end } = res;
  res.writeHead = function dropHead(this: ServerResponse) {
    return this;
  } as ServerResponse['writeHead'];
  res.write = function dropWrite(this: ServerResponse, ...args: unknown[]) {
    const callback = args.find((a) => typeof a === 'function') as (() => void) | undefined;
    if (callback) process.nextTick(callback);
    return true;
  } as ServerResponse['write'];
  res.end = function endWithAnswer(this: ServerResponse, ...args: unknown[]) {
    res.writeHead = writeHead;
    res.write = write;
    res.end = end;
    const callback = args.find((a) => typeof a === 'function') as (() => void) | undefined;
    const sent = withHeadersBefore(before, answer);
    res.statusCode = sent.status;
    replaceHeaders(res, sent.headers);
    (end as End).call(res, sent.body, callback);
    return this;
  } as ServerResponse['end'];
}
