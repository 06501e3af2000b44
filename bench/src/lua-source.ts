import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The repository's `lua/` directory (bench/dist/ → ../../lua). */
export const LUA_DIR = join(__dirname, '..', '..', 'lua');

/** `--- @include "includes/<name>"` lines, expanded the way the core's build embeds the scripts. */
const INCLUDE = /^--- @include "([\w/-]+)"\s*$/gm;

function expand(dir: string, source: string, seen: Set<string>): string {
  return source.replace(INCLUDE, (_, path: string) => {
    if (seen.has(path)) return `-- (${path} included above)`;
    seen.add(path);
    const included = readFileSync(join(dir, `${path}.lua`), 'utf8').trimEnd();
    return `-- ${path}.lua\n${expand(dir, included, seen)}`;
  });
}

/**
 * The text of `<dir>/<name>.lua` with its includes expanded, byte for byte as the core's build embeds it
 * (so from this repository's `lua/` it has the core's SHA-1). `dir` may be another checkout's `lua/`, to
 * compare versions.
 * @throws Error (ENOENT) when the script or one of its includes does not exist.
 */
export function luaSource(name: string, dir = LUA_DIR): string {
  return expand(dir, readFileSync(join(dir, `${name}.lua`), 'utf8'), new Set());
}
