/**
 * Runs the model check: spin turns model/record.pml into a verifier (pan.c), the C compiler builds it
 * once per process (cached by the model's text), and each check runs it with its bounds, and a mutation,
 * in the environment (record.pml's init reads them). A counterexample is replayed (`pan -r`) into a
 * readable trace (trace.ts).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatTrace } from './trace';

/** The folder of record.pml and scripts.pml. */
export const MODEL_DIR = join(__dirname, '..');

/** How far the check explores: record.pml's MODEL_* variables. */
export interface Bounds {
  /** Workers running the runner's protocol, 1 to 3. */
  readonly workers: number;
  /** Deliveries of the message each worker takes. */
  readonly deliveries: number;
  /** Claims again after a CONFLICT, per delivery (the conflict wait). */
  readonly waits: number;
  readonly maxAttempts: number;
  /** Records lost (DEL, expiry, a restart without persistence). */
  readonly losses: number;
  readonly crashes: number;
  /** Replies lost after their command applied, or commands applied late (or never) after their caller gave up. */
  readonly faults: number;
  readonly adminReleases: number;
  readonly purges: number;
}

/** The bounds `npm test` explores: three checks, each over every interleaving. */
export const DEFAULT_CHECKS: Readonly<Record<string, Bounds>> = {
  'three workers': {
    workers: 3,
    deliveries: 1,
    waits: 1,
    maxAttempts: 2,
    losses: 0,
    crashes: 0,
    faults: 1,
    adminReleases: 0,
    purges: 0,
  },
  'record losses and crashes': {
    workers: 2,
    deliveries: 1,
    waits: 1,
    maxAttempts: 2,
    losses: 2,
    crashes: 1,
    faults: 1,
    adminReleases: 0,
    purges: 0,
  },
  'an operator': {
    workers: 2,
    deliveries: 1,
    waits: 1,
    maxAttempts: 2,
    losses: 1,
    crashes: 0,
    faults: 1,
    adminReleases: 1,
    purges: 1,
  },
};

/** The guards of scripts.pml and record.pml a mutation removes, by their number there. */
export const MUTANTS = {
  DROP_LIVE_LEASE_CONFLICT: 1,
  DROP_CLOCK_IN_TOKEN: 2,
  KEEP_TOKEN_ON_TAKEOVER: 3,
  DROP_WRITE_FENCE: 4,
  DROP_COMPLETE_FENCE: 5,
  DROP_NEVER_STARTED_GIVE_BACK: 6,
  DROP_DUPLICATE: 7,
  DROP_RESERVED_IN_RAN_BEFORE: 8,
  RUN_ON_SHORT_LEASE: 9,
} as const;

/** What one run of the verifier found. */
export interface CheckResult {
  readonly errors: number;
  readonly states: number;
  readonly transitions: number;
  readonly depth: number;
  readonly seconds: number;
  /** The property the counterexample violates (record.pml's number), when there is one. */
  readonly violated?: number;
  /** The counterexample, step by step (trace.ts), when there is one. */
  readonly trace?: string[];
  /** pan's own report. */
  readonly output: string;
}

/**
 * Why the check cannot run here (spin or a C compiler missing), or undefined when it can.
 * @throws in CI (`CI` set), where .ci/run installs spin: a missing tool is a failure there, not a skip.
 */
export function missingTools(): string | undefined {
  const reason = findMissingTool();
  if (reason !== undefined && process.env.CI) throw new Error(`model check: ${reason}`);
  return reason;
}

function findMissingTool(): string | undefined {
  for (const tool of ['spin', 'cc']) {
    const found = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' });
    if (found.status !== 0) {
      return tool === 'spin'
        ? 'spin is not installed (Debian: apt-get install -y spin; .ci/run installs it)'
        : 'no C compiler (cc) to build the verifier';
    }
  }
  return undefined;
}

let built: string | undefined;

/**
 * The verifier's folder: built once per model text (spin -a, then cc), in the system's temporary folder,
 * and renamed into place whole, so two test runs at once do not see a half-built one.
 */
export function buildVerifier(): string {
  if (built !== undefined) return built;
  const text = ['record.pml', 'scripts.pml'].map((f) => readFileSync(join(MODEL_DIR, f), 'utf8')).join('\0');
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 16);
  const root = join(tmpdir(), 'idempotent-consumer-model');
  const dir = join(root, hash);
  if (!existsSync(join(dir, 'pan'))) {
    mkdirSync(root, { recursive: true });
    const work = mkdtempSync(join(root, 'build-'));
    execFileSync('spin', ['-a', join(MODEL_DIR, 'record.pml')], { cwd: work, stdio: 'pipe' });
    // Safety properties only (assertions), hash-compacted states; -O1 builds in a few seconds.
    execFileSync('cc', ['-O1', '-DSAFETY', '-DNOFAIR', '-DHC4', '-DMEMLIM=4096', '-o', 'pan', 'pan.c'], {
      cwd: work,
      stdio: 'pipe',
    });
    try {
      renameSync(work, dir);
    } catch {
      // Another run built it first.
      rmSync(work, { recursive: true, force: true });
    }
  }
  built = dir;
  return dir;
}

function environment(bounds: Bounds, mutant: number, only: number): NodeJS.ProcessEnv {
  return {
    ...process.env,
    MODEL_WORKERS: String(bounds.workers),
    MODEL_DELIVERIES: String(bounds.deliveries),
    MODEL_WAITS: String(bounds.waits),
    MODEL_MAX_ATTEMPTS: String(bounds.maxAttempts),
    MODEL_LOSSES: String(bounds.losses),
    MODEL_CRASHES: String(bounds.crashes),
    MODEL_FAULTS: String(bounds.faults),
    MODEL_ADMIN_RELEASES: String(bounds.adminReleases),
    MODEL_PURGES: String(bounds.purges),
    MODEL_MUTANT: String(mutant),
    MODEL_ONLY: String(only),
  };
}

function number(output: string, pattern: RegExp): number {
  const match = pattern.exec(output);
  return match ? Number(match[1]) : Number.NaN;
}

/**
 * Explores every interleaving within `bounds` (the model unchanged unless `mutant` names a guard to remove;
 * `only`: the one property to check, 0 for all). A counterexample is replayed into `trace`; with
 * `shortest`, pan keeps searching for a shorter one first.
 */
export function check(
  bounds: Bounds,
  options: { mutant?: number; only?: number; shortest?: boolean } = {},
): CheckResult {
  const source = buildVerifier();
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-consumer-model-run-'));
  try {
    const env = environment(bounds, options.mutant ?? 0, options.only ?? 0);
    const args = ['-m100000', ...(options.shortest ? ['-i'] : [])];
    const run = spawnSync(join(source, 'pan'), args, { cwd: dir, env, encoding: 'utf8', maxBuffer: 1 << 26 });
    const output = `${run.stdout}${run.stderr}`;
    const errors = number(output, /errors: (\d+)/);
    if (Number.isNaN(errors)) throw new Error(`pan did not report (exit ${run.status}):\n${output}`);
    const result = {
      errors,
      states: number(output, /(\d+) states, stored/),
      transitions: number(output, /(\d+) transitions/),
      depth: number(output, /depth reached (\d+)/),
      seconds: number(output, /elapsed time ([\d.e+]+) seconds/),
      output,
    };
    if (errors === 0) return result;
    const replay = spawnSync(join(source, 'pan'), ['-r', 'record.pml.trail'], {
      cwd: dir,
      env,
      encoding: 'utf8',
      maxBuffer: 1 << 26,
    });
    const lines = replay.stdout.split('\n');
    const violated = lines.map((l) => /^@violated (\d+)/.exec(l.trim())).find((m) => m !== null);
    return { ...result, violated: violated ? Number(violated[1]) : undefined, trace: formatTrace(lines) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
