import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The version of `@idempotent-consumer/cli`, read from its package.json (one directory above this file,
 * both as compiled in dist/ and as source in src/; npm always ships package.json), for `--version`.
 * Read on the first call, then kept.
 * @throws the `readFileSync` or `JSON.parse` error when the package.json is missing or malformed.
 */
export function cliVersion(): string {
  version ??= (JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { version: string })
    .version;
  return version;
}

let version: string | undefined;
