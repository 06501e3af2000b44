import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The version of `@idempotent-consumer/cli`, read from its package.json (one directory above this file,
 * both as compiled in dist/ and as source in src/; npm always ships package.json), for `--version`.
 * Read on the first call, then kept. `'unknown'` when that package.json cannot be read (a bundle that left it
 * out): the program is built with its version for every command, which must not fail for it.
 */
export function cliVersion(): string {
  if (version === undefined) {
    try {
      const read = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
        version?: unknown;
      };
      version = typeof read.version === 'string' ? read.version : 'unknown';
    } catch {
      version = 'unknown';
    }
  }
  return version;
}

let version: string | undefined;
