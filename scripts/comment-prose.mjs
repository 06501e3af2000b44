#!/usr/bin/env node
// Measures the prose of source comments: parentheses and colons per 100 words, and doc blocks longer
// than a screen. Usage: node scripts/comment-prose.mjs [--max-block 25] [--fail] <file or dir>...
// Code inside comments (`inline`, fenced blocks, {@link targets}) is not counted as prose.
// With --fail it exits 1 when a doc block is longer than --max-block lines.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';

const args = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  args.splice(i, 1);
  return true;
};
const option = (name, fallback) => {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const [, value] = args.splice(i, 2);
  return Number(value);
};
// A reader that stops early (`| head`) is not an error.
process.stdout.on('error', () => process.exit(0));
const fail = flag('--fail');
const maxBlock = option('--max-block', 25);
const roots = args.length > 0 ? args : ['packages'];

function* files(path) {
  if (statSync(path).isFile()) {
    yield path;
    return;
  }
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    if (['node_modules', 'dist', 'generated'].includes(entry.name)) continue;
    const child = join(path, entry.name);
    if (entry.isDirectory()) yield* files(child);
    else if (['.ts', '.lua', '.mjs'].includes(extname(child)) && !child.endsWith('.d.ts')) yield child;
  }
}

/** The comments of a file, each with the line it starts on, its line count and its text. */
function comments(file) {
  const text = readFileSync(file, 'utf8');
  const lua = file.endsWith('.lua');
  const found = [];
  const pattern = lua ? /--\[\[([\s\S]*?)\]\]|--([^\n]*)/g : /\/\*([\s\S]*?)\*\/|(?<![:'"`\\])\/\/([^\n]*)/g;
  for (const m of text.matchAll(pattern)) {
    const line = text.slice(0, m.index).split('\n').length;
    const body = m[1] ?? m[2] ?? '';
    const doc = m[1] !== undefined && (lua || m[0].startsWith('/**'));
    found.push({ line, lines: m[0].split('\n').length, body, doc });
  }
  return found;
}

function prose(body) {
  return body
    .replace(/```[\s\S]*?```/g, ' ')
    .replace(/`[^`\n]*`/g, ' code ')
    .replace(/\{@link(?:code|plain)?\s+([^}|\s]+)(?:[\s|]([^}]*))?\}/g, (_, target, label) => label ?? target)
    .replace(/^\s*\*/gm, ' ')
    .replace(/https?:\/\/\S+/g, ' link ');
}

let words = 0;
let parens = 0;
let colons = 0;
const long = [];
for (const root of roots) {
  for (const file of files(root)) {
    for (const c of comments(file)) {
      const p = prose(c.body);
      words += (p.match(/[\p{L}\p{N}][\p{L}\p{N}'’-]*/gu) ?? []).length;
      parens += (p.match(/\(/g) ?? []).length;
      colons += (p.match(/:(?!\/)/g) ?? []).length;
      if (c.doc && c.lines > maxBlock) long.push(`${file}:${c.line} ${c.lines} lines`);
    }
  }
}
const per100 = (n) => (words === 0 ? '0' : ((n * 100) / words).toFixed(2));
process.stdout.write(
  `${roots.join(' ')}: ${words} words of comments, ${per100(parens)} parentheses and ${per100(colons)} colons per 100 words, ` +
    `${long.length} doc blocks over ${maxBlock} lines\n`,
);
for (const l of long) process.stdout.write(`  ${l}\n`);
if (fail && long.length > 0) process.exit(1);
