import * as root from '../../src';
import * as kit from '../../src/kit';

describe('kit: the sub-path export', () => {
  it('exports exactly the kit pieces', () => {
    expect(Object.keys(kit).sort()).toEqual(
      [
        'DEFAULT_STORE_PROBE_BACKOFF',
        'LeaseKeeperSet',
        'StoreGate',
        'TypedEventEmitter',
        'checkBackoffOptions',
        'checkFiniteNonNegative',
        'checkFunction',
        'checkNonEmptyString',
        'checkNonNegativeInteger',
        'checkOneOf',
        'checkPositiveInteger',
        'checkRunOverrides',
        'extendHandlerContext',
        'heartbeatIntervalFor',
        'pickRunOverrides',
        'sleep',
      ].sort(),
    );
  });

  it('the root export (what users import) holds none of them', () => {
    const rootNames = new Set(Object.keys(root));
    expect(Object.keys(kit).filter((name) => rootNames.has(name))).toEqual([]);
  });

  it('resolves by its package name, as adapters import it', async () => {
    const byName = await import('@idempotent-consumer/core/kit');
    expect(Object.keys(byName).sort()).toEqual(Object.keys(kit).sort());
  });
});
