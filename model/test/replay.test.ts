import fc from 'fast-check';
import { type ReplayStep, replayInModel, replayInSpin } from '../src/replay';
import { missingTools } from '../src/spin';

// The oracle of the model-based tests (model/src/record-model.ts) and the scripts spin checks
// (model/scripts.pml) are one model: the same random calls give the same replies and records in both.
const missing = missingTools();

// Mostly the latest claim's token (-1), else any of the first few.
const token = fc.oneof(
  { weight: 3, arbitrary: fc.constant(-1) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 12 }) },
);
const step: fc.Arbitrary<ReplayStep> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('claim' as const),
      fingerprint: fc.constantFrom(0 as const, 1 as const, 2 as const),
      maxAttempts: fc.integer({ min: 0, max: 3 }),
      reserve: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constantFrom('start' as const, 'extend' as const, 'mark-dead-lettered' as const),
      token,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('complete' as const), token, withResult: fc.boolean() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('release' as const),
      token,
      abandoned: fc.boolean(),
      neverStarted: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('fail' as const), token, abandoned: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('admin-release' as const),
      token,
      state: fc.constantFrom(0 as const, 1 as const, 4 as const),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('admin-purge' as const),
      states: fc.integer({ min: 0, max: 15 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constantFrom('lapse' as const, 'lose' as const) }) },
);

(missing === undefined ? it.each : it.skip.each)([1, 2, 3, 4, 5])(
  `scripts.pml and record-model.ts answer 400 random calls alike, batch %i${missing ? ` (skipped: ${missing})` : ''}`,
  (seed) => {
    // 400 calls issue fewer than 256 tokens (a byte in the model).
    const drawn = fc.sample(fc.array(step, { minLength: 400, maxLength: 400 }), { numRuns: 1, seed })[0]!;
    const { lines: model, steps } = replayInModel(drawn);
    const spin = replayInSpin(steps);
    expect(spin.length).toBe(steps.length * 2);
    for (let i = 0; i < model.length; i++) {
      if (spin[i] !== model[i]) {
        const at = Math.floor(i / 2);
        throw new Error(
          `step ${at} ${JSON.stringify(steps[at])}: spin ${spin[i]}, the TypeScript model ${model[i]}\n` +
            `steps before: ${JSON.stringify(steps.slice(Math.max(0, at - 8), at))}`,
        );
      }
    }
  },
  60_000,
);
