import { execFileSync } from 'node:child_process';

/** The first of `programs` that cannot be run here (`<program> --version` fails), or `undefined`. */
export function missingProgram(programs: readonly string[]): string | undefined {
  for (const program of programs) {
    try {
      execFileSync(program, ['--version'], { stdio: 'ignore' });
    } catch {
      return program;
    }
  }
  return undefined;
}

/**
 * `describe` when every program a suite starts itself is installed (`redis-server`, `redis-sentinel`...),
 * otherwise `describe.skip` with the reason in the title, so the suite is reported skipped, never passed.
 */
export function describeWithPrograms(programs: readonly string[], title: string, body: () => void): void {
  const missing = missingProgram(programs);
  if (missing) {
    const why = `no ${missing} program installed${missing === 'redis-sentinel' ? ' (apt-get install redis-sentinel)' : ''}`;
    process.stderr.write(`[integration] SKIPPED "${title}": ${why}\n`);
    describe.skip(`${title} [skipped: ${why}]`, body);
    return;
  }
  describe(title, body);
}
