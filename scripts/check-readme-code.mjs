#!/usr/bin/env node
// Type-checks every ```ts block of every README.md (the root, packages/*, docs/ and every other tracked
// README) against the built workspace packages, twice: as an ES module (a .mts file under module node16)
// and as CommonJS (a .cts file, the block's body wrapped in an async function because CommonJS has no
// top-level await). A README therefore cannot drift from the API.
//
// Blocks are self-contained: what they use they import or declare (`declare function chargeCard(…)`).
// Markers, on the line right before the fence:
//   <!-- readme-check: continue -->               the block continues the previous block of the same file
//   <!-- readme-check: skip <reason> -->          the block is not checked; the reason is required
// Run after `npm run build` (it resolves @idempotent-consumer/* through node_modules to packages/*/dist).
// It also fails on references to design or services notes kept outside the repository.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const ts = createRequire(import.meta.url)('typescript');
const CACHE = join('node_modules', '.cache', 'readme-check');
const outDir = join(root, CACHE);

/**
 * Where a README's blocks are written: under its workspace (`packages/<name>`, `demo`, …) when it has its
 * own node_modules, so its imports resolve as that package's do (npm nests a dependency there when a
 * root copy would break a peer range), else under the root's.
 */
function outDirOf(rel) {
  const parts = rel.split('/');
  const workspace = parts[0] === 'packages' ? parts.slice(0, 2).join('/') : parts.length > 1 ? parts[0] : '';
  if (workspace && existsSync(join(root, workspace, 'node_modules'))) return join(root, workspace, CACHE);
  return outDir;
}

const MARKER = /^<!--\s*readme-check:\s*(\w+)\s*(.*?)\s*-->\s*$/;
/** A TypeScript fence, also indented (in a list) or with words after the language. */
const FENCE_OPEN = /^(\s*)```(?:ts|typescript|mts|cts)(?:\s.*)?$/;

/** Every tracked (or new, not ignored) README.md and docs/*.md of the repository. */
function markdownFiles() {
  const out = execFileSync(
    'git',
    ['ls-files', '--cached', '--others', '--exclude-standard', '--', '*README.md', 'docs/*.md'],
    { cwd: root, encoding: 'utf8' },
  );
  return [...new Set(out.split('\n').filter(Boolean))].sort();
}

/**
 * The ```ts blocks of one markdown file, joined where a block continues the previous one.
 * @returns units of `{ file, lines: [{ text, line }] }`, `line` being 1-based in the markdown file.
 */
export function extractUnits(file, text) {
  const units = [];
  const skipped = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE_OPEN.exec(lines[i]);
    if (!open) continue;
    const indent = open[1].length;
    const marker = MARKER.exec((lines[i - 1] ?? '').trim());
    const body = [];
    let j = i + 1;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j]); j++) {
      body.push({ text: lines[j].slice(Math.min(indent, lines[j].search(/\S|$/))), line: j + 1 });
    }
    if (j === lines.length) throw new Error(`${file}:${i + 1}: unterminated code block`);
    if (marker?.[1] === 'skip') {
      if (!marker[2]) throw new Error(`${file}:${i}: "readme-check: skip" needs a reason`);
      skipped.push(`${file}:${i + 1} (${marker[2]})`);
    } else if (marker?.[1] === 'continue') {
      const previous = units.at(-1);
      if (!previous || previous.file !== file) throw new Error(`${file}:${i}: nothing to continue`);
      previous.lines.push(...body);
    } else if (marker) {
      throw new Error(`${file}:${i}: unknown marker "${marker[1]}" (use skip <reason> or continue)`);
    } else {
      units.push({ file, start: i + 1, lines: body });
    }
    i = j;
  }
  return { units, skipped };
}

/**
 * Splits a block into the statements kept at the top level of the CommonJS file (imports, `declare`,
 * `interface` and `type` declarations) and the rest (wrapped in an async function there). A hoisted
 * statement starts at column 0 and ends at the first line at column 0 that ends with `;` or `}`.
 */
function splitHoisted(lines) {
  const hoisted = [];
  const rest = [];
  let inStatement = false;
  for (const l of lines) {
    if (!inStatement && /^(import|declare|interface|type)\s/.test(l.text)) inStatement = true;
    (inStatement ? hoisted : rest).push(l);
    if (inStatement && /^\S/.test(l.text) && /[;}]\s*$/.test(l.text)) inStatement = false;
  }
  return { hoisted, rest };
}

/** Writes one unit as .mts and .cts; returns the line maps (generated line → markdown line). */
function writeUnit(unit, index) {
  const dir = outDirOf(unit.file);
  mkdirSync(dir, { recursive: true });
  const base = `${relative(root, unit.file).replace(/[^a-zA-Z0-9]+/g, '_')}_${unit.start}_${index}`;
  const esm = ['export {};', ...unit.lines.map((l) => l.text)];
  const esmMap = [0, ...unit.lines.map((l) => l.line)];
  const { hoisted, rest } = splitHoisted(unit.lines);
  const cjs = [
    ...hoisted.map((l) => l.text),
    'export {};',
    'async function readmeBlock(): Promise<void> {',
    // A declaration a module exports (a Next.js route handler's `export const POST`) is local in here.
    ...rest.map((l) => l.text.replace(/^export (?=(?:const|let|async function|function|class) )/, '')),
    '}',
    'void readmeBlock;',
  ];
  const cjsMap = [...hoisted.map((l) => l.line), 0, 0, ...rest.map((l) => l.line), 0, 0];
  const files = [
    { path: join(dir, `${base}.mts`), text: esm, map: esmMap, unit, format: 'ESM' },
    { path: join(dir, `${base}.cts`), text: cjs, map: cjsMap, unit, format: 'CJS' },
  ];
  for (const f of files) writeFileSync(f.path, `${f.text.join('\n')}\n`);
  return files;
}

/**
 * References to documents outside the repository (a design or services note that users never see) are
 * errors: docs and TSDoc point into the repository (docs/design.md, integration-tests/README.md).
 */
function outsideReferences() {
  try {
    const out = execFileSync(
      'git',
      [
        'grep',
        '-n',
        '-I',
        '-E',
        String.raw`(DESIGN|SERVICES)\.md|\.\./shared/`,
        '--',
        '.',
        `:!${relative(root, fileURLToPath(import.meta.url))}`,
      ],
      { cwd: root, encoding: 'utf8' },
    );
    return out.split('\n').filter(Boolean);
  } catch (error) {
    if (error.status === 1) return []; // git grep: no match
    throw error;
  }
}

function main() {
  const outside = outsideReferences();
  if (outside.length > 0) {
    console.error(
      `${outside.join('\n')}\nThese refer to documents outside the repository; point into docs/ instead.`,
    );
    process.exit(1);
  }
  const files = markdownFiles();
  for (const dir of new Set([outDir, ...files.map(outDirOf)])) rmSync(dir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const generated = [];
  const allSkipped = [];
  let blocks = 0;
  for (const rel of files) {
    const file = join(root, rel);
    const { units, skipped } = extractUnits(rel, readFileSync(file, 'utf8'));
    allSkipped.push(...skipped);
    for (const unit of units) generated.push(...writeUnit(unit, blocks++));
  }
  const program = ts.createProgram(
    generated.map((g) => g.path),
    {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2023.d.ts'],
      module: ts.ModuleKind.Node16,
      moduleResolution: ts.ModuleResolutionKind.Node16,
      types: ['node'],
      typeRoots: [join(root, 'node_modules', '@types')],
      skipLibCheck: true,
      // NestJS' decorators (parameter decorators included) as its applications compile them.
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
    },
  );
  const byPath = new Map(generated.map((g) => [g.path, g]));
  const errors = [];
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    const g = d.file && byPath.get(d.file.fileName);
    if (!g) {
      errors.push(`error TS${d.code}: ${message}`);
      continue;
    }
    const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
    const mdLine = g.map[line] || g.unit.start;
    errors.push(`${g.unit.file}:${mdLine} (${g.format}) error TS${d.code}: ${message}`);
  }
  for (const s of allSkipped) console.log(`skipped ${s}`);
  if (errors.length > 0) {
    console.error(errors.join('\n'));
    console.error(
      `README code: ${errors.length} error(s) in ${blocks} block(s); generated files in ${outDir}`,
    );
    process.exit(1);
  }
  console.log(`README code: ${blocks} TypeScript block(s) type-check as ESM and CJS`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
