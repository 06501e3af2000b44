import type { LeaseLostDuring } from '../../src';
import { leaseLostDuring } from '../../src/kit/lease-lost-during';

describe('kit: leaseLostDuring', () => {
  it.each([
    ['start', 'start'],
    ['heartbeat', 'heartbeat'],
    ['local-deadline', 'heartbeat'],
    ['write', 'write'],
  ] as [LeaseLostDuring, string][])(
    "a run lost during '%s' is an adapter's leaseLost during '%s'",
    (during, expected) => {
      expect(leaseLostDuring({ during })).toBe(expected);
    },
  );
});
