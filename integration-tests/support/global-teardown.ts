import type { FoundService } from './service';

/**
 * Stops every service global-setup.ts started, then names what the run left open. On a 2-core machine Jest
 * runs the suites in its own process, so a socket or timer a test forgot keeps that process alive; the
 * config's `forceExit` ends it anyway, and this line says what to fix.
 */
export default async function globalTeardown(): Promise<void> {
  const started = (globalThis as { __icStarted?: FoundService[] }).__icStarted ?? [];
  await Promise.allSettled(started.map((s) => s.stop()));
  await new Promise((resolve) => setImmediate(resolve));
  const open = process
    .getActiveResourcesInfo()
    .filter((kind) => kind !== 'TTYWrap' && kind !== 'Immediate' && kind !== 'PipeWrap');
  if (open.length > 0) {
    process.stderr.write(
      `\n[integration] still open after teardown (a test leaked them): ${open.join(', ')}\n`,
    );
  }
}
