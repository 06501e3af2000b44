import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The version of `@idempotent-consumer/cli`, read from its package.json (one directory above this file,
 * both as compiled in dist/ and as source in src/; npm always ships package.json), for `--version`.
 * Read on the first call, then kept. `'unknown'` when that package.json cannot be read (a bundle that left it
 * out): the program is built with its version for every command, which must not fail for it
 * ({@link versionFrom}).
 */
export function cliVersion(): string {
  version ??= versionFrom(() => readFileSync(join(__dirname, '..', 'package.json'), 'utf8'));
  return version;
}

let version: string | undefined;

/**
 * The `version` of the package.json text that `readPackageJson` returns; `'unknown'` when it throws (no such
 * file), its text is not JSON, or it has no `version` string. Never throws.
 */
export function versionFrom(readPackageJson: () => string): string {
  try {
    const read = JSON.parse(readPackageJson()) as { version?: unknown } | null;
    return typeof read?.version === 'string' ? read.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
