import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The version of `@idempotent-consumer/cli` for `--version`, read from its package.json. That file is one
 * directory above this one, both as compiled in dist/ and as source in src/, and npm always ships it. It is
 * read on the first call, then kept. `'unknown'` when the file cannot be read, as in a bundle that left it
 * out. The program is built with its version for every command, which must not fail for it, see
 * {@link versionFrom}.
 */
export function cliVersion(): string {
  version ??= versionFrom(() => readFileSync(join(__dirname, '..', 'package.json'), 'utf8'));
  return version;
}

let version: string | undefined;

/**
 * The `version` of the package.json text that `readPackageJson` returns. `'unknown'` when it throws, when its
 * text is not JSON, or when it has no `version` string. Never throws.
 */
export function versionFrom(readPackageJson: () => string): string {
  try {
    const read = JSON.parse(readPackageJson()) as { version?: unknown } | null;
    return typeof read?.version === 'string' ? read.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
