/**
 * A path that normalises to itself: segments of unreserved characters (which no step re-encodes) that
 * do not start with a dot (no `.` or `..` segment), no empty segment, no trailing slash, no query.
 */
const PLAIN_PATH = /^(?:\/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+$/;

/**
 * The request target as the payload fingerprint takes it (`fingerprintTarget`): the path and query of
 * `target` (the request line's target: origin form `/a/b?x=1`, or absolute form `http://host/a/b?x=1` from
 * a forward proxy, whose scheme and host are dropped), spelled one way for every spelling that names the
 * same resource and parameters, so that a client's retry through another library or proxy is still the
 * same payload:
 *
 * - each path segment's percent-encoding is normalised (`%2c` and `%2C` and `,` alike); a segment that does
 *   not decode is kept as sent;
 * - a trailing `/` is dropped (Express routes `/orders/` and `/orders` alike unless `strict routing`);
 * - the query parameters are sorted by name (stable: the values of one name keep their order) and encoded
 *   as `URLSearchParams` does (`+` and `%20` alike);
 * - letter case is kept: route parameters are case-sensitive values.
 *
 * A target that is not a URL path at all (unparsable) is returned as it is.
 */
export function normalizeRequestTarget(target: string): string {
  // Most targets are already in normal form: a path of plain segments without a query.
  if (PLAIN_PATH.test(target)) return target;
  let url: URL;
  try {
    // An origin-form target is a path: `//a/7` is that path, not a host `a` (as a relative URL would be).
    url = target.startsWith('/') ? new URL(`http://target.invalid${target}`) : new URL(target);
  } catch {
    return target;
  }
  let path = url.pathname
    .split('/')
    .map((segment) => {
      try {
        return encodeURIComponent(decodeURIComponent(segment));
      } catch {
        return segment;
      }
    })
    .join('/');
  if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  const params = [...url.searchParams].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return params.length > 0 ? `${path}?${new URLSearchParams(params).toString()}` : path;
}
