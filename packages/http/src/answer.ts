import type { HttpAnswer } from './problem';
import type { OutgoingHeaders } from './stored-response';

/** The parts of a Node `ServerResponse` (and so of Express' `res` and Fastify's `reply.raw`) used here. */
export interface HeaderTarget {
  getHeaderNames(): string[];
  removeHeader(name: string): void;
  setHeader(name: string, value: number | string | readonly string[]): unknown;
}

/**
 * A copy of the headers a response has before its handler runs (`res.getHeaders()`, Fastify's
 * `reply.getHeaders()`): those set by middleware or hooks ahead of the claim (CORS, security headers, a
 * request id). An answer that replaces the handler's response keeps them ({@link withHeadersBefore}).
 */
export function headersBefore(headers: OutgoingHeaders): OutgoingHeaders {
  const copy: Record<string, number | string | readonly string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) copy[name.toLowerCase()] = Array.isArray(value) ? [...value] : value;
  }
  return copy;
}

/**
 * `answer` with the headers the response had before its handler ran (`before`, from
 * {@link headersBefore}) under its own: what replaces a handler's response (500 `response-too-large`)
 * drops every header the handler set with its body (`Location`, `Cache-Control`, its `Content-*`), and
 * keeps those of the middleware ahead of the claim, as a replay or a problem answered before the handler
 * does (a browser must be able to read it across origins). The answer's headers replace any of the same
 * name.
 */
export function withHeadersBefore(
  before: OutgoingHeaders,
  answer: HttpAnswer,
): { readonly status: number; readonly headers: OutgoingHeaders; readonly body: Buffer } {
  return { ...answer, headers: { ...before, ...answer.headers } };
}

/** Replaces every header already set on a response with `headers` (`undefined` values are left out). */
export function replaceHeaders(target: HeaderTarget, headers: OutgoingHeaders): void {
  for (const name of target.getHeaderNames()) target.removeHeader(name);
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) target.setHeader(name, value);
}
