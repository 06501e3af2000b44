#!/usr/bin/env node
// Gives every publishable package under packages/ the shared publishing metadata: LICENSE (copied from the
// root), author, homepage, repository (with its directory), bugs, "type": "commonjs", publishConfig, and a
// `files` list that ships LICENSE and src (so source and declaration maps resolve) but not the build info.
// Keywords, description, sideEffects and peer ranges stay each package's own. Run it after adding a package;
// `npm run check:pack` fails on a tarball without LICENSE. `--check` only reports what it would change.
import { copyFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const checkOnly = process.argv.includes('--check');
const rootManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const repo = rootManifest.repository.url.replace(/^git\+/, '').replace(/\.git$/, '');
const license = readFileSync(join(root, 'LICENSE'), 'utf8');
const changes = [];

for (const entry of readdirSync(join(root, 'packages'), { withFileTypes: true })) {
  const dir = join(root, 'packages', entry.name);
  const file = join(dir, 'package.json');
  if (!entry.isDirectory() || !existsSync(file)) continue;
  const text = readFileSync(file, 'utf8');
  const manifest = JSON.parse(text);
  if (manifest.private) continue;
  const shared = {
    license: 'MIT',
    author: rootManifest.author,
    homepage: `${repo}/tree/main/packages/${entry.name}#readme`,
    repository: { type: 'git', url: rootManifest.repository.url, directory: `packages/${entry.name}` },
    bugs: rootManifest.bugs,
    type: manifest.type ?? 'commonjs',
  };
  const next = { ...manifest };
  for (const [k, v] of Object.entries(shared)) next[k] = v;
  const files = new Set(next.files ?? ['dist']);
  for (const f of ['dist', '!dist/.tsbuildinfo', 'src', 'README.md', 'CHANGELOG.md', 'LICENSE']) files.add(f);
  next.files = [...files];
  next.publishConfig = { access: 'public', ...next.publishConfig };
  const out = `${JSON.stringify(next, null, 2)}\n`;
  if (out !== text) {
    changes.push(`${entry.name}/package.json`);
    if (!checkOnly) writeFileSync(file, out);
  }
  const licenseFile = join(dir, 'LICENSE');
  if (!existsSync(licenseFile) || readFileSync(licenseFile, 'utf8') !== license) {
    changes.push(`${entry.name}/LICENSE`);
    if (!checkOnly) copyFileSync(join(root, 'LICENSE'), licenseFile);
  }
}
if (changes.length === 0) console.log('package metadata: every package is in sync');
else if (checkOnly)
  console.log(
    `package metadata out of sync: ${changes.join(', ')} (run node scripts/sync-package-metadata.mjs)`,
  );
else console.log(`package metadata updated: ${changes.join(', ')}`);
if (checkOnly && changes.length > 0) process.exitCode = 1;
