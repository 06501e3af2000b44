import { parseItem, Token } from 'structured-headers';

/** Name of the request header that carries the idempotency key (draft, section 2). */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/** Why an `Idempotency-Key` header was refused. */
export type InvalidKeyReason = 'empty' | 'too-long' | 'malformed';

/** What {@link parseIdempotencyKey} found. */
export type ParsedIdempotencyKey =
  | { readonly kind: 'missing' }
  | { readonly kind: 'key'; readonly key: string }
  | { readonly kind: 'invalid'; readonly reason: InvalidKeyReason; readonly detail: string };

/** A bare key as clients send it unquoted: visible ASCII except `"`, `,`, `;` and `\`. */
const BARE_KEY = /^[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]+$/;

/**
 * Reads the idempotency key from the value of an `Idempotency-Key` header.
 *
 * The draft ("The Idempotency-Key HTTP Header Field", section 2) defines the value as a Structured Field
 * Item of type String (RFC 8941/9651), such as `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, parsed here with
 * `structured-headers`; parameters are ignored. Because many clients send the key unquoted, a Token and a
 * bare value of visible ASCII without `"`, `,`, `;` and `\` are accepted too (so `12345` and an unquoted
 * UUID are keys). Refused: an empty value or string, a key longer than `maxKeyBytes` UTF-8 bytes, and
 * anything else (several comma-joined header lines, a broken string, spaces).
 *
 * @param value - the header value as Node gives it (`string[]` values are joined with `, `, as repeated
 *   header lines are).
 * @param maxKeyBytes - longest accepted key, in UTF-8 bytes.
 */
export function parseIdempotencyKey(
  value: string | readonly string[] | undefined,
  maxKeyBytes: number,
): ParsedIdempotencyKey {
  if (value === undefined) return { kind: 'missing' };
  const text = (typeof value === 'string' ? value : value.join(', ')).trim();
  if (text === '') return invalid('empty', 'The Idempotency-Key header is empty');
  const key = itemKey(text);
  if (key === undefined) {
    return invalid(
      'malformed',
      'The Idempotency-Key header must be one Structured Field string, such as "4f3c…", or a bare token',
    );
  }
  if (key === '') return invalid('empty', 'The Idempotency-Key header is an empty string');
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > maxKeyBytes) {
    return invalid(
      'too-long',
      `The idempotency key is ${bytes} bytes long; at most ${maxKeyBytes} are accepted`,
    );
  }
  return { kind: 'key', key };
}

/** The key of a header value: a Structured Field String or Token, else a bare key; `undefined` if none. */
function itemKey(text: string): string | undefined {
  try {
    const [item] = parseItem(text);
    if (typeof item === 'string') return item;
    if (item instanceof Token) return item.toString();
  } catch {
    // Not one Structured Field Item: maybe a bare key.
  }
  // A bare key that is not a String or Token, such as `8e03978e-40d5-…` (starts like a number) or `12345`.
  return BARE_KEY.test(text) ? text : undefined;
}

function invalid(reason: InvalidKeyReason, detail: string): ParsedIdempotencyKey {
  return { kind: 'invalid', reason, detail };
}
