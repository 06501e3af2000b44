/** A response read whole by the suites' HTTP client (Node's `fetch`, undici). */
export interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly bytes: Buffer;
  /** The body parsed as JSON (`undefined` when it is not JSON). */
  readonly json: unknown;
}

/**
 * `POST base + path` with a JSON body. `key` is sent as the `Idempotency-Key` header value verbatim
 * (quote it yourself for a Structured Field string); `tenant` as `x-tenant`.
 */
export async function post(
  base: string,
  path: string,
  options: {
    key?: string;
    body?: unknown;
    rawBody?: string;
    tenant?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers };
  if (options.key !== undefined) headers['idempotency-key'] = options.key;
  if (options.tenant !== undefined) headers['x-tenant'] = options.tenant;
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers,
    body: options.rawBody ?? JSON.stringify(options.body ?? {}),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, bytes, json };
}

/** A fresh Structured Field string key, quoted as the draft writes it. */
export const freshKey = (): string => `"${crypto.randomUUID()}"`;
