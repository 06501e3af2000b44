import { type Bounds, check, DEFAULT_CHECKS, MUTANTS, missingTools } from '../src/spin';
import { PROPERTIES } from '../src/trace';

// The model check (model/record.pml, model/README.md): every interleaving within the default bounds
// satisfies every property, and each property fails once its guard is removed, so none holds vacuously.
const missing = missingTools();
const describeModel = missing === undefined ? describe : describe.skip;
if (missing !== undefined) {
  describe('model check', () => {
    it.skip(`skipped: ${missing}`, () => {});
  });
}

/** Small bounds that reach every guard's counterexample within a second. */
const MUTANT_BOUNDS: Bounds = {
  workers: 2,
  deliveries: 1,
  waits: 1,
  maxAttempts: 2,
  losses: 1,
  crashes: 0,
  faults: 1,
  adminReleases: 0,
  purges: 0,
};

/** Each property and the guard it rests on. */
const GUARDS: [property: number, mutant: keyof typeof MUTANTS][] = [
  [1, 'KEEP_TOKEN_ON_TAKEOVER'],
  [2, 'DROP_LIVE_LEASE_CONFLICT'],
  [3, 'DROP_WRITE_FENCE'],
  [4, 'DROP_CLOCK_IN_TOKEN'],
  [5, 'DROP_COMPLETE_FENCE'],
  [6, 'DROP_NEVER_STARTED_GIVE_BACK'],
  [7, 'DROP_DUPLICATE'],
  [8, 'DROP_RESERVED_IN_RAN_BEFORE'],
  [7, 'RUN_ON_SHORT_LEASE'],
];

describeModel('model check (spin)', () => {
  it.each(Object.entries(DEFAULT_CHECKS))(
    '%s: no interleaving violates a property',
    (name, bounds) => {
      const result = check(bounds);
      console.log(
        `model check, ${name}: ${result.states} states, ${result.transitions} transitions, depth ${result.depth}, ${result.seconds} s`,
      );
      if (result.errors > 0) throw new Error(`counterexample:\n${(result.trace ?? []).join('\n')}`);
      expect(result.states).toBeGreaterThan(10_000);
    },
    120_000,
  );

  it.each(GUARDS)('P%i fails without its guard %s: a readable counterexample', (property, mutant) => {
    const result = check(MUTANT_BOUNDS, { mutant: MUTANTS[mutant], only: property, shortest: true });
    expect(result.errors).toBeGreaterThan(0);
    expect(result.violated).toBe(property);
    const trace = result.trace ?? [];
    expect(trace[trace.length - 1]).toBe(`VIOLATED ${PROPERTIES[property]}`);
    expect(trace.length).toBeGreaterThan(2);
    console.log(`P${property} without ${mutant}:\n  ${trace.join('\n  ')}`);
  });
});
