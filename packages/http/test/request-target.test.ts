import { normalizeRequestTarget } from '../src/request-target';

describe('normalizeRequestTarget', () => {
  it('spells alike what names the same resource and parameters', () => {
    const one = normalizeRequestTarget('/accounts/A%2cB/payouts?b=2&a=1&a=0&q=x%20y');
    for (const other of [
      '/accounts/A%2CB/payouts?a=1&a=0&b=2&q=x+y',
      '/accounts/A,B/payouts/?a=1&b=2&a=0&q=x%20y',
      'http://api.example:8080/accounts/A%2cB/payouts?q=x+y&a=1&a=0&b=2',
    ]) {
      expect(normalizeRequestTarget(other)).toBe(one);
    }
  });

  it('tells apart another path, another case, another value or another order of one parameter', () => {
    const base = normalizeRequestTarget('/accounts/A/payouts?dryRun=true');
    for (const other of [
      '/accounts/B/payouts?dryRun=true',
      '/accounts/a/payouts?dryRun=true',
      '/accounts/A/payouts',
      '/accounts/A/payouts?dryRun=false',
    ]) {
      expect(normalizeRequestTarget(other)).not.toBe(base);
    }
    expect(normalizeRequestTarget('/x?a=1&a=2')).not.toBe(normalizeRequestTarget('/x?a=2&a=1'));
    // A path that starts with two slashes is a path, not a host.
    expect(normalizeRequestTarget('//a/7')).not.toBe(normalizeRequestTarget('//b/7'));
    expect(normalizeRequestTarget('//a/7')).toBe('//a/7');
  });

  it('keeps the root and a segment that does not decode', () => {
    expect(normalizeRequestTarget('/')).toBe('/');
    expect(normalizeRequestTarget('/bad/%E0%A4%A')).toBe('/bad/%E0%A4%A');
  });
});
