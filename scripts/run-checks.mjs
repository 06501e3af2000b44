#!/usr/bin/env node
// Runs the npm scripts named on the command line (`node scripts/run-checks.mjs lint check:readme …`) all at
// once, for `npm test`: the checks read the build and write only their own scratch space (check:readme
// node_modules/.cache/readme-check, check:docs docs/api, check:pack a temporary directory), so none depends
// on another, and together they take less than their sum. Each script's output is printed whole when it
// ends, with its exit status and duration. A script that runs longer than `CHECK_LIMIT_SECONDS` (600) is
// stopped and counted as failed, so a hung check cannot stall CI with nothing printed. Exit status: non-zero
// when any script failed.
import { spawn } from 'node:child_process';

const limitSeconds = Number(process.env.CHECK_LIMIT_SECONDS ?? 600);
/** The process groups of the scripts still running (each script runs in a group of its own). */
const running = new Set();

/** Stops a script's whole process group (npm and what it started). */
function stopGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Ended already.
  }
}

// Interrupted (Ctrl-C, a CI stop): the scripts' groups are not in this terminal's group, so stop them here.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const pid of running) stopGroup(pid);
    process.exit(130);
  });
}

const scripts = process.argv.slice(2);
if (scripts.length === 0) {
  console.error('usage: node scripts/run-checks.mjs <npm script> [<npm script> …]');
  process.exit(2);
}

/** Runs `npm run <script>`; resolves with its exit code once it ended and its output was printed. */
function runScript(script) {
  const started = Date.now();
  return new Promise((resolve) => {
    const chunks = [];
    // Its own process group, so that a stop reaches npm's children too (they hold the output pipes).
    const child = spawn('npm', ['run', script], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    running.add(child.pid);
    const watchdog = setTimeout(() => {
      chunks.push(Buffer.from(`\n[check] npm run ${script} ran longer than ${limitSeconds} s; stopped\n`));
      stopGroup(child.pid);
    }, limitSeconds * 1000);
    child.stdout.on('data', (chunk) => chunks.push(chunk));
    child.stderr.on('data', (chunk) => chunks.push(chunk));
    let ended = false;
    const done = (code) => {
      if (ended) return;
      ended = true;
      clearTimeout(watchdog);
      running.delete(child.pid);
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      const verdict = code === 0 ? 'passed' : `FAILED (exit ${code})`;
      process.stdout.write(`\n[check] ===== npm run ${script}: ${verdict} in ${seconds} s =====\n`);
      process.stdout.write(Buffer.concat(chunks));
      resolve({ script, code });
    };
    child.on('error', (error) => {
      chunks.push(Buffer.from(`${error.message}\n`));
      done(1);
    });
    child.on('close', (code, signal) => done(code ?? signal));
  });
}

const results = await Promise.all(scripts.map(runScript));
const failed = results.filter((r) => r.code !== 0).map((r) => r.script);
if (failed.length > 0) console.error(`\n[check] failed: ${failed.join(', ')}`);
process.exitCode = failed.length > 0 ? 1 : 0;
