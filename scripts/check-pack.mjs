#!/usr/bin/env node
// Packs every publishable workspace under packages/ (`npm pack`), checks each tarball (LICENSE, README,
// source maps that resolve inside the tarball), installs the tarballs into a scratch project outside the
// repository (peers from the npm cache, else the registry), imports every package from CommonJS, from an
// ES module and from TypeScript (module node16 as .cts and .mts, and moduleResolution bundler), and runs
// publint --strict and @arethetypeswrong/cli on every tarball. A second scratch project checks the oldest
// peer line the packages accept where it differs in kind (amqplib 0.10 with @types/amqplib). New packages are picked up automatically.
// Run after `npm run build`.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const bin = (pkg, name) => join(root, 'node_modules', pkg, name);
const started = Date.now();
const failures = [];

const execFileAsync = promisify(execFile);

/** Runs a program; resolves its stdout, rejects with its stdout and stderr. */
async function run(cmd, args, cwd) {
  if (process.env.PACK_CHECK_VERBOSE) {
    console.error(`+${((Date.now() - started) / 1000).toFixed(1)} s`, cmd, args.join(' ').slice(0, 100));
  }
  const env = { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false' };
  const { stdout } = await execFileAsync(cmd, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/** Runs a check; a failure is recorded with its output and the run goes on. */
async function check(label, fn) {
  try {
    await fn();
  } catch (error) {
    const out = [error.stdout, error.stderr].filter(Boolean).join('\n').trim();
    failures.push(`${label}: ${out || error.message}`);
  }
}

const npmInstall = (dir) =>
  run(
    'npm',
    ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock'],
    dir,
  );

/** The publishable workspaces under packages/, with their package.json. */
function packages() {
  return readdirSync(join(root, 'packages'), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => ({
      dir: join(root, 'packages', d.name),
      manifest: readManifest(join(root, 'packages', d.name)),
    }))
    .filter((p) => p.manifest && !p.manifest.private);
}

function readManifest(dir) {
  try {
    return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  } catch {
    return undefined;
  }
}

/** The version of `name` that `dir` resolves (nearest node_modules upwards; exports maps do not matter). */
function installedVersion(name, dir) {
  for (let d = dir; ; d = dirname(d)) {
    const manifest = readManifest(join(d, 'node_modules', name));
    if (manifest) return manifest.version;
    if (d === dirname(d)) throw new Error(`${name} is not installed (needed as a peer from ${dir})`);
  }
}

/**
 * Every entry point of a package (`.` and each subpath of its exports map, except `./package.json` and
 * patterns) with the named value exports of its build, to import them back from every format.
 */
function entryPoints(pkg) {
  const { name, exports } = pkg.manifest;
  const subpaths =
    exports && typeof exports === 'object' && !Array.isArray(exports) ? Object.keys(exports) : ['.'];
  return subpaths
    .filter((sub) => sub.startsWith('.') && sub !== './package.json' && !sub.includes('*'))
    .map((sub) => {
      const specifier = sub === '.' ? name : `${name}${sub.slice(1)}`;
      const names = Object.keys(require(specifier)).filter((k) => k !== 'default' && k !== '__esModule');
      return { name: specifier, exports: names };
    });
}

/** Every file of a tarball (paths without the `package/` prefix). */
async function tarballFiles(tarball) {
  return (await run('tar', ['-tzf', tarball], root))
    .split('\n')
    .filter(Boolean)
    .map((f) => f.replace(/^package\//, ''));
}

/** LICENSE and README present; every source map's sources are in the tarball or inlined. */
async function checkTarball(name, tarball, scratchPkgDir) {
  const files = new Set(await tarballFiles(tarball));
  for (const required of ['LICENSE', 'README.md', 'package.json']) {
    if (!files.has(required)) failures.push(`${name}: the tarball has no ${required}`);
  }
  for (const f of files) {
    if (!f.endsWith('.map')) continue;
    const map = JSON.parse(readFileSync(join(scratchPkgDir, f), 'utf8'));
    map.sources.forEach((source, i) => {
      const target = join(dirname(f), map.sourceRoot ?? '', source);
      if (!files.has(target) && typeof map.sourcesContent?.[i] !== 'string') {
        failures.push(`${name}: ${f} points at ${target}, which is not in the tarball`);
      }
    });
  }
}

const tsc = bin('typescript', 'bin/tsc');
const tscOptions = ['--noEmit', '--strict', '--skipLibCheck', '--target', 'es2022', '--types', 'node'];

/** Writes a project of the given dependencies into `dir` and installs it. */
async function scratchProject(dir, dependencies) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch', private: true, dependencies }));
  await npmInstall(dir);
}

/** Imports every package from CJS, ESM and TypeScript; the named exports must be those of the build. */
async function importEverywhere(app, pkgs) {
  const names = pkgs.flatMap(entryPoints);
  const aliased = (exports, i) => exports.map((k) => `${k} as m${i}_${k}`).join(', ');
  const cjs = names.map(
    ({ name, exports }, i) =>
      `const m${i} = require('${name}');\n` +
      `for (const k of ${JSON.stringify(exports)}) if (m${i}[k] === undefined) throw new Error('${name}: ' + k + ' missing in CJS');`,
  );
  const esm = names.map(
    ({ name, exports }, i) =>
      `import { ${aliased(exports, i)} } from '${name}';\n` +
      `for (const [k, v] of Object.entries({ ${exports.map((k) => `${k}: m${i}_${k}`).join(', ')} })) if (v === undefined) throw new Error('${name}: ' + k + ' missing in ESM');`,
  );
  writeFileSync(join(app, 'check.cjs'), `${cjs.join('\n')}\n`);
  writeFileSync(join(app, 'check.mjs'), `${esm.join('\n')}\n`);
  const tsImports = names.map(({ name, exports }, i) => `import { ${aliased(exports, i)} } from '${name}';`);
  const tsUse = `export const used = [${names.flatMap((n, i) => n.exports.map((k) => `m${i}_${k}`)).join(', ')}];`;
  const ts = `${tsImports.join('\n')}\n${tsUse}\n`;
  mkdirSync(join(app, 'ts'));
  for (const f of ['node16.mts', 'node16.cts', 'bundler.ts']) writeFileSync(join(app, 'ts', f), ts);
  const typeRoots = ['--typeRoots', join(root, 'node_modules/@types')];
  await Promise.all([
    check('CommonJS require', () => run(process.execPath, ['check.cjs'], app)),
    check('ES module import', () => run(process.execPath, ['check.mjs'], app)),
    check('TypeScript node16', () =>
      run(
        process.execPath,
        [tsc, ...tscOptions, ...typeRoots, '--module', 'node16', 'ts/node16.mts', 'ts/node16.cts'],
        app,
      ),
    ),
    check('TypeScript bundler', () =>
      run(
        process.execPath,
        [
          tsc,
          ...tscOptions,
          ...typeRoots,
          '--module',
          'esnext',
          '--moduleResolution',
          'bundler',
          'ts/bundler.ts',
        ],
        app,
      ),
    ),
  ]);
}

/** amqplib 0.10 (the line most installations run) types through @types/amqplib: the consumer accepts it. */
const AMQPLIB_010 = `import { Idempotency, MemoryIdempotencyStore } from '@idempotent-consumer/core';
import { createIdempotentConsumer } from '@idempotent-consumer/rabbitmq';
import { connect } from 'amqplib';
const connection = await connect('amqp://127.0.0.1');
const idempotency = new Idempotency({ store: new MemoryIdempotencyStore() });
const consumer = createIdempotentConsumer({ idempotency, connection }, { queue: 'q' }, async ({ message }) => message.content.length);
await consumer.start();
`;

async function checkAmqplib010(dir, tarballs) {
  const core = tarballs.get('@idempotent-consumer/core');
  const rabbitmq = tarballs.get('@idempotent-consumer/rabbitmq');
  if (!core || !rabbitmq) return;
  await scratchProject(dir, {
    '@idempotent-consumer/core': `file:${core}`,
    '@idempotent-consumer/rabbitmq': `file:${rabbitmq}`,
    amqplib: '0.10.9',
    '@types/amqplib': '0.10.8',
  });
  writeFileSync(join(dir, 'consumer.mts'), AMQPLIB_010);
  const typeRoots = [
    '--typeRoots',
    `${join(dir, 'node_modules/@types')},${join(root, 'node_modules/@types')}`,
  ];
  await run(process.execPath, [tsc, ...tscOptions, ...typeRoots, '--module', 'node16', 'consumer.mts'], dir);
}

const scratch = mkdtempSync(join(tmpdir(), 'idempotent-consumer-pack-'));
try {
  const pkgs = packages();
  const tarballDir = join(scratch, 'tarballs');
  mkdirSync(tarballDir);
  const packArgs = [
    'pack',
    '--json',
    '--pack-destination',
    tarballDir,
    ...pkgs.flatMap((p) => ['-w', p.dir]),
  ];
  const packed = JSON.parse(await run('npm', packArgs, root));
  const tarballs = new Map(packed.map((p) => [p.name, join(tarballDir, p.filename)]));

  // The scratch project: the tarballs plus every peer, at the version the repository builds against.
  const dependencies = {};
  for (const p of pkgs) {
    dependencies[p.manifest.name] = `file:${tarballs.get(p.manifest.name)}`;
    for (const peer of Object.keys(p.manifest.peerDependencies ?? {})) {
      if (dependencies[peer] || peer.startsWith('@types/')) continue;
      dependencies[peer] = installedVersion(peer, p.dir);
    }
  }
  const app = join(scratch, 'app');
  const lint = pkgs.flatMap((p) => {
    const tarball = tarballs.get(p.manifest.name);
    return [
      () =>
        check(`publint ${p.manifest.name}`, () =>
          run(process.execPath, [bin('publint', 'src/cli.js'), 'run', tarball, '--strict'], scratch),
        ),
      () =>
        check(`attw ${p.manifest.name}`, () =>
          run(
            process.execPath,
            [bin('@arethetypeswrong/cli', 'dist/index.js'), tarball, '--format', 'ascii'],
            scratch,
          ),
        ),
    ];
  });
  await Promise.all([
    check('package metadata', () =>
      run(process.execPath, [join(root, 'scripts', 'sync-package-metadata.mjs'), '--check'], root),
    ),
    (async () => {
      await scratchProject(app, dependencies);
      await importEverywhere(app, pkgs);
      for (const p of pkgs)
        await checkTarball(
          p.manifest.name,
          tarballs.get(p.manifest.name),
          join(app, 'node_modules', p.manifest.name),
        );
    })().catch((error) => failures.push(`scratch project: ${error.stderr || error.message}`)),
    check('amqplib 0.10 with @types/amqplib', () => checkAmqplib010(join(scratch, 'amqplib-0.10'), tarballs)),
    (async () => {
      for (const step of lint) await step();
    })(),
  ]);

  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (failures.length > 0) {
    console.error(failures.join('\n\n'));
    console.error(`pack check: ${failures.length} failure(s) in ${pkgs.length} package(s), ${seconds} s`);
    process.exitCode = 1;
  } else {
    console.log(
      `pack check: ${pkgs.map((p) => p.manifest.name).join(', ')} pack, install and import from CJS, ESM, ` +
        `TypeScript node16 and bundler; amqplib 0.10 types; publint --strict and attw pass (${seconds} s)`,
    );
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
