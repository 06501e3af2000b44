#!/usr/bin/env node
// `turbo run build`, silent unless it fails: `npm run demo -- --help` then shows the demo's help, not the
// build's log. On failure the whole build output is printed and the exit code passed on.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const turbo = join(root, 'node_modules', '.bin', 'turbo');
const result = spawnSync(turbo, ['run', 'build', '--output-logs=errors-only', '--log-prefix=none'], {
  cwd: root,
  encoding: 'utf8',
  maxBuffer: 64 * 1024 * 1024,
});
if (result.error || result.status !== 0) {
  process.stderr.write(`${result.stdout ?? ''}${result.stderr ?? ''}`);
  if (result.error) console.error(`build failed to start: ${result.error.message}`);
  process.exit(result.status || 1);
}
