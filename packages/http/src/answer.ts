import type { HttpAnswer } from './problem';

/** The parts of a Node `ServerResponse` (and so of Express' `res` and Fastify's `reply.raw`) used here. */
export interface HeaderTarget {
  getHeaderNames(): string[];
  removeHeader(name: string): void;
  setHeader(name: string, value: string | readonly string[]): unknown;
}

/** Replaces every header already set on a response with the answer's headers. */
export function replaceHeaders(target: HeaderTarget, answer: HttpAnswer): void {
  for (const name of target.getHeaderNames()) target.removeHeader(name);
  for (const [name, value] of Object.entries(answer.headers)) target.setHeader(name, value);
}
