/**
 * The URL without its password, for messages (the CLI's, the demo's, a tool's): the one before the host and a `password` parameter, which
 * ioredis also reads (`redis://host:6379?password=…`). A URL without a scheme is read as ioredis reads it,
 * as if `//` (and so `redis://`) came first: `user:password@host:6379` has a password too, and is shown
 * as `redis://user:***@host:6379`. A Unix socket path (`/tmp/redis.sock?password=…`) keeps its form. What
 * the WHATWG URL parser refuses is shown as `(an unparsable URL)`, never as typed.
 */
export function redactUrl(url: string): string {
  try {
    if (url.startsWith('/') && !url.startsWith('//')) {
      const query = url.indexOf('?');
      if (query < 0) return url;
      const params = new URLSearchParams(url.slice(query + 1));
      if (params.has('password')) params.set('password', '***');
      return `${url.slice(0, query)}?${params.toString()}`;
    }
    // ioredis (parseURL) prefixes `//` to what has no `scheme://`, so `user:password@host` is credentials.
    const parsed = new URL(
      /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? url : `redis://${url.replace(/^\/\//, '')}`,
    );
    if (parsed.password) parsed.password = '***';
    if (parsed.searchParams.has('password')) parsed.searchParams.set('password', '***');
    return parsed.toString();
  } catch {
    return '(an unparsable URL)';
  }
}
