import type { IncomingHeaders } from './admission';

/** Whether a request carries a body (RFC 9112, section 6.3), from its headers. */
export function hasBody(headers: IncomingHeaders): boolean {
  return headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
}
