#!/usr/bin/env node
// Runs the whole Jest suite on the Node that runs this script (the machine's Node) and on the newest
// supported Node release line, 24, so `npm test` checks both ends of what the packages support (engines
// `>=20`; Node 22 lies between them). Arguments are passed to Jest (`npm test -- packages/core`).
//
// The two runs go one after the other by default: on a busy 2-core CI machine the suites' timing-bound
// waits (leases, broker timeouts) get less room with a second run beside them, and a red CI run costs more
// than the minutes saved. `JEST_EACH_NODE_PARALLEL=1` runs them at the same time (every suite works on names
// of its own or on servers it starts itself, jest.config.js, and each run's global setup starts its own Kafka
// mock cluster and SQS emulator): measured 364 s for both at once against 372 s + 341 s one after the other.
// The machine Node's output is then shown as it comes; the Node 24 run's output (stdout and stderr) is held
// and shown whole after the first run's, once both ended, so the two never interleave.
//
// Node 24 comes from the registry's `node` package (its binary packages, no other download), installed once
// into node_modules/.cache/node24 (outside the tracked tree; `NODE24_BIN=/path/to/node` uses another one).
// When it cannot be had (no registry), the second run is reported as SKIPPED with the reason; set
// `REQUIRE_NODE24=1` to make that a failure. Exit status: non-zero when any run failed.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const jestBin = join(root, 'node_modules', 'jest', 'bin', 'jest.js');
const extraMajor = 24;
const cacheDir = join(root, 'node_modules', '.cache', `node${extraMajor}`);
const jestArgs = process.argv.slice(2);
// A run that lasts longer than this is stopped and counted as failed, so a hang cannot stall CI
// (a whole run takes about 4 minutes on a quiet 2-core machine).
const runLimitSeconds = Number(process.env.JEST_RUN_LIMIT_SECONDS ?? 1500);

/** Major version of a Node binary, or undefined when it does not run. */
function majorOf(bin) {
  const out = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  const match = out.status === 0 ? /^v(\d+)\./.exec(out.stdout.trim()) : null;
  return match ? { major: Number(match[1]), version: out.stdout.trim() } : undefined;
}

/** Path of a Node `extraMajor` binary, installing it into the cache when absent; or a reason it is not. */
function findExtraNode() {
  const override = process.env.NODE24_BIN;
  if (override) {
    return majorOf(override)?.major === extraMajor
      ? { bin: override }
      : { reason: `NODE24_BIN=${override} is not a Node ${extraMajor} binary` };
  }
  const bin = join(cacheDir, 'node_modules', '.bin', 'node');
  if (majorOf(bin)?.major === extraMajor) return { bin };
  console.log(`[test] installing node@${extraMajor} from the registry into ${cacheDir}`);
  mkdirSync(cacheDir, { recursive: true });
  const install = spawnSync(
    'npm',
    [
      'install',
      '--prefix',
      cacheDir,
      '--no-save',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
      `node@${extraMajor}`,
    ],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  if (install.status === 0 && existsSync(bin) && majorOf(bin)?.major === extraMajor) return { bin };
  return { reason: `npm install node@${extraMajor} failed (exit ${install.status ?? install.signal})` };
}

/**
 * Runs Jest with one Node binary; resolves with its exit code, duration and the reporter's summary line.
 * `held`: its stdout and stderr are collected rather than shown, and handed back as `output`, in order.
 */
function runJest(nodeBin, label, { held = false } = {}) {
  const output = [];
  /** Shows a chunk of the run's output on `stream`, or holds it. */
  const show = (stream, chunk) => (held ? output.push({ stream, chunk }) : stream.write(chunk));
  show(process.stdout, `\n[test] ===== Jest on ${label} (${nodeBin}) =====\n`);
  if (held) console.log(`\n[test] Jest on ${label} started beside it; its output follows once both ended`);
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(nodeBin, [jestBin, ...jestArgs], {
      cwd: root,
      stdio: [held ? 'ignore' : 'inherit', 'pipe', held ? 'pipe' : 'inherit'],
    });
    let tail = '';
    const watchdog = setTimeout(() => {
      show(process.stdout, `\n[test] Jest on ${label} ran longer than ${runLimitSeconds} s; stopping it\n`);
      child.kill('SIGKILL');
    }, runLimitSeconds * 1000);
    child.stdout.on('data', (chunk) => {
      show(process.stdout, chunk);
      tail = (tail + chunk.toString()).slice(-4096);
    });
    if (held) child.stderr.on('data', (chunk) => show(process.stderr, chunk));
    child.on('close', (code, signal) => {
      clearTimeout(watchdog);
      resolve({
        label,
        code: code ?? 1,
        signal,
        seconds: (Date.now() - started) / 1000,
        counts: /Summary: (\d+) passed, (\d+) failed, (\d+) skipped/.exec(tail)?.slice(1).map(Number),
        output,
      });
    });
  });
}

const here = majorOf(process.execPath);
// Node 24 is found (or installed) before either run starts: installing it (a synchronous npm) beside a
// running Jest would stop this process from relaying that run's output.
const extra = here.major !== extraMajor ? findExtraNode() : undefined;
const skipped = extra?.reason ? `Node ${extraMajor}: SKIPPED, ${extra.reason}` : undefined;
const firstLabel = `Node ${here.version}`;
const runs = [];
if (!extra?.bin) runs.push(await runJest(process.execPath, firstLabel));
else {
  const extraLabel = `Node ${majorOf(extra.bin).version}`;
  if (process.env.JEST_EACH_NODE_PARALLEL !== '1') {
    runs.push(await runJest(process.execPath, firstLabel));
    runs.push(await runJest(extra.bin, extraLabel));
  } else {
    const [first, second] = await Promise.all([
      runJest(process.execPath, firstLabel),
      runJest(extra.bin, extraLabel, { held: true }),
    ]);
    for (const { stream, chunk } of second.output) stream.write(chunk);
    runs.push(first, second);
  }
}

/**
 * Whether a run failed: a non-zero exit, or failed tests in its Summary line even with exit 0 (one full
 * local run ended 0 with a failing test and without Jest's closing lines; the count is the second witness).
 */
const runFailed = (run) => run.code !== 0 || (run.counts?.[1] ?? 0) > 0;

console.log('\n[test] ===== Jest per Node release =====');
for (const run of runs) {
  const verdict = !runFailed(run)
    ? 'passed'
    : run.code !== 0
      ? `FAILED (exit ${run.signal ?? run.code})`
      : 'FAILED (tests failed, exit 0)';
  const counts = run.counts
    ? `${run.counts[0]} passed, ${run.counts[1]} failed, ${run.counts[2]} skipped`
    : 'no counts';
  console.log(`[test] ${run.label}: ${verdict} in ${run.seconds.toFixed(0)} s (${counts})`);
}
if (skipped) console.log(`[test] ${skipped}`);
// The closing line keeps the shape of scripts/summary-reporter.js, summed over the runs, for any CI to read.
const total = [0, 1, 2].map((i) => runs.reduce((sum, run) => sum + (run.counts?.[i] ?? 0), 0));
console.log(
  `Summary: ${total[0]} passed, ${total[1]} failed, ${total[2]} skipped (${runs.map((r) => r.label).join(' + ')})`,
);
const failed = runs.some(runFailed) || (skipped !== undefined && process.env.REQUIRE_NODE24 === '1');
process.exitCode = failed ? 1 : 0;
