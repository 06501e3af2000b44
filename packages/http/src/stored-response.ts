import { isUtf8 } from 'node:buffer';
import type { HttpAnswer } from './problem';

/**
 * A response as kept in the record's result (the core stores it as JSON, deflated above
 * `compressAboveBytes`) and replayed to later requests with the same key: version 1.
 */
export interface StoredResponse {
  readonly v: 1;
  /** HTTP status code. */
  readonly status: number;
  /** The allow-listed response headers, names in lower case. */
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  /** The body: UTF-8 text when the bytes are valid UTF-8, else base64. */
  readonly body: string;
  readonly encoding: 'utf8' | 'base64';
}

/** Response headers replayed by default: what describes the body and the created resource. */
export const DEFAULT_REPLAY_HEADERS: readonly string[] = [
  'content-type',
  'content-language',
  'content-location',
  'location',
  'etag',
  'last-modified',
  'link',
];

/** Header values as Node and the frameworks report them (`res.getHeaders()`). */
export type OutgoingHeaders = Readonly<Record<string, number | string | readonly string[] | undefined>>;

/**
 * Builds the stored form of a response. Only headers named in `replayHeaders` are kept (names compared in
 * lower case); `set-cookie`, hop-by-hop and framing headers are never stored unless listed. The one
 * exception is `content-encoding`, always kept when present: the stored bytes are in that coding (a body
 * the handler gzipped, or one a compression hook before this one encoded), and replayed without it they
 * would not be readable.
 */
export function storeResponse(
  status: number,
  headers: OutgoingHeaders,
  body: Buffer,
  replayHeaders: ReadonlySet<string>,
): StoredResponse {
  const kept: Record<string, string | readonly string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (value === undefined || (!replayHeaders.has(lower) && lower !== 'content-encoding')) continue;
    kept[lower] = typeof value === 'number' ? String(value) : value;
  }
  const utf8 = isUtf8(body);
  return {
    v: 1,
    status,
    headers: kept,
    body: body.toString(utf8 ? 'utf8' : 'base64'),
    encoding: utf8 ? 'utf8' : 'base64',
  };
}

/**
 * The answer that replays a stored response: its status, headers and body bytes, plus `replayedHeader:
 * true`. A multi-valued header is replayed as it was sent, one line per value (joining `Set-Cookie`
 * values with commas would make one broken cookie of them). `undefined` when `value` is not a
 * {@link StoredResponse} (nothing was stored for the key).
 */
export function replayAnswer(value: unknown, replayedHeader: string): HttpAnswer | undefined {
  if (!isStoredResponse(value)) return undefined;
  const headers: Record<string, string | readonly string[]> = { ...value.headers };
  headers[replayedHeader.toLowerCase()] = 'true';
  return { status: value.status, headers, body: Buffer.from(value.body, value.encoding) };
}

function isStoredResponse(value: unknown): value is StoredResponse {
  const r = value as Partial<StoredResponse> | null;
  return (
    typeof r === 'object' &&
    r !== null &&
    r.v === 1 &&
    Number.isInteger(r.status) &&
    typeof r.body === 'string' &&
    (r.encoding === 'utf8' || r.encoding === 'base64') &&
    typeof r.headers === 'object' &&
    r.headers !== null
  );
}
