/**
 * The model check from the command line: `npx tsx model/src/check-cli.ts` runs the default bounds (what
 * `npm test` runs); `name=value` arguments change them for one larger check, for example
 * `npx tsx model/src/check-cli.ts workers=3 losses=1 crashes=1`. Prints states and time, or the
 * counterexample as a trace; exits 1 on a counterexample.
 */
import { type Bounds, check, DEFAULT_CHECKS } from './spin';

const overrides = process.argv.slice(2).map((arg) => {
  const [name, value] = arg.split('=');
  return [name, Number(value)] as const;
});
const checks: [string, Bounds][] =
  overrides.length === 0
    ? Object.entries(DEFAULT_CHECKS)
    : [['given bounds', { ...DEFAULT_CHECKS['three workers']!, ...Object.fromEntries(overrides) }]];
let failed = false;
for (const [name, bounds] of checks) {
  const result = check(bounds);
  console.log(
    `${name} ${JSON.stringify(bounds)}: ${result.states} states, ${result.transitions} transitions, depth ${result.depth}, ${result.seconds} s, ${result.errors} errors`,
  );
  if (result.errors > 0) {
    failed = true;
    console.log(`  ${(result.trace ?? []).join('\n  ')}`);
  }
}
process.exit(failed ? 1 : 0);
