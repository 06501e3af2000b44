#!/usr/bin/env node
// Runs the npm scripts named on the command line (`node scripts/run-checks.mjs lint check:readme …`) all at
// once, for `npm test`: the checks read the build and write only their own scratch space (check:readme
// node_modules/.cache/readme-check, check:docs docs/api, check:pack a temporary directory), so none depends
// on another, and together they take less than their sum. Each script's output is printed whole when it
// ends, with its exit status and duration. Exit status: non-zero when any script failed.
import { spawn } from 'node:child_process';

const scripts = process.argv.slice(2);
if (scripts.length === 0) {
  console.error('usage: node scripts/run-checks.mjs <npm script> [<npm script> …]');
  process.exit(2);
}

/** Runs `npm run <script>`; resolves with its exit code once it ended and its output was printed. */
function runScript(script) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks = [];
    child.stdout.on('data', (chunk) => chunks.push(chunk));
    child.stderr.on('data', (chunk) => chunks.push(chunk));
    let ended = false;
    const done = (code) => {
      if (ended) return;
      ended = true;
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
