import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// The README's examples are the files in test/examples (typechecked by `tsc -b packages/http/test`).
describe('README examples', () => {
  const readme = readFileSync(join(__dirname, '..', 'README.md'), 'utf8');
  it.each(['express', 'fastify', 'hono', 'fetch', 'nest'])(
    'the %s example is test/examples/%s.ts verbatim',
    (name) => {
      const source = readFileSync(join(__dirname, 'examples', `${name}.ts`), 'utf8');
      const body = source.slice(source.indexOf('\n') + 1).trimEnd();
      expect(readme).toContain(`\`\`\`ts\n${body}\n\`\`\``);
    },
  );
});
