import { setTimeout as sleep } from 'node:timers/promises';
import type { FoundService } from './service';

/** Resource kinds that are not a test's: the terminal, pending immediates, the output pipes. */
const EXPECTED = new Set(['TTYWrap', 'Immediate', 'PipeWrap']);

/** How long resources may take to go away by themselves before they count as leaked, in ms. */
const SETTLE_MS = 1000;

/**
 * Stops every service global-setup.ts started, then names what the run left open. On a 2-core machine Jest
 * runs the suites in its own process, so a socket or timer a test forgot keeps that process alive; the
 * config's `forceExit` ends it anyway, and this line says what to fix.
 *
 * Only what is still open {@link SETTLE_MS} after the teardown counts: right after the last test, Jest's
 * own reporter has a 100 ms status timer pending (`Status._debouncedEmit` in @jest/reporters), and a
 * client that a test closed (`redis.quit()` resolves on the server's OK) has a socket that is destroyed
 * but not yet closed. Both went away by themselves and were reported as "Timeout" and "TCPSocketWrap".
 */
export default async function globalTeardown(): Promise<void> {
  const started = (globalThis as { __icStarted?: FoundService[] }).__icStarted ?? [];
  await Promise.allSettled(started.map((s) => s.stop()));
  const stillOpen = () => process.getActiveResourcesInfo().filter((kind) => !EXPECTED.has(kind));
  let open = stillOpen();
  for (let waited = 0; open.length > 0 && waited < SETTLE_MS; waited += 50) {
    await sleep(50); // fired by the time of the next check: not counted itself
    open = stillOpen();
  }
  if (open.length > 0) {
    process.stderr.write(
      `\n[integration] still open ${SETTLE_MS} ms after teardown (a test leaked them): ${open.join(', ')}\n`,
    );
  }
}
