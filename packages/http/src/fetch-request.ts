import type { IncomingHeaders } from './admission';
import type { ResolvedHttpOptions } from './options';

/** The path and query of an absolute URL (`https://host/a/b?x=1` → `/a/b?x=1`), as the request line had it. */
export function fetchTarget(url: string): string {
  const scheme = url.indexOf('://');
  const path = scheme === -1 ? -1 : url.indexOf('/', scheme + 3);
  if (path === -1) return '/';
  const hash = url.indexOf('#', path);
  return hash === -1 ? url.slice(path) : url.slice(path, hash);
}

/**
 * The request headers the rules read (`idempotency-key`, `content-type` and the `fingerprintHeaders`),
 * from a fetch `Headers`: the rest are never looked at, so they are not copied.
 */
export function fetchHeaders(headers: Headers, options: ResolvedHttpOptions<never>): IncomingHeaders {
  const picked: Record<string, string | undefined> = {
    'idempotency-key': headers.get('idempotency-key') ?? undefined,
    'content-type': headers.get('content-type') ?? undefined,
  };
  for (const name of options.fingerprintHeaders) picked[name] = headers.get(name) ?? undefined;
  return picked;
}

/** Whether a media type is JSON: `application/json` or a `+json` suffix, parameters ignored. */
export function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const end = contentType.indexOf(';');
  const type = (end === -1 ? contentType : contentType.slice(0, end)).trim().toLowerCase();
  return type === 'application/json' || type.endsWith('+json');
}

/**
 * The body of a fetch request as the payload fingerprint takes it: a JSON body (`application/json`,
 * `+json`) parsed, so that key order and number spelling do not matter, as behind Express' and Fastify's
 * JSON parsers; any other body, and JSON that does not parse, as its bytes; no body (or an empty one) as
 * none. Every media type can be fingerprinted this way, so a fetch handler never answers 415.
 * `read` reads the body as text (`'text'`, for JSON) or bytes; a binding that caches the body (Hono's
 * `c.req`) reads it through that cache, so the handler can read it again.
 */
export async function fetchBody(
  contentType: string | undefined,
  read: { text(): Promise<string>; bytes(): Promise<Uint8Array> },
): Promise<unknown> {
  if (isJsonMediaType(contentType)) {
    const text = await read.text();
    if (text === '') return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return Buffer.from(text, 'utf8');
    }
  }
  const bytes = await read.bytes();
  return bytes.byteLength === 0 ? undefined : bytes;
}
