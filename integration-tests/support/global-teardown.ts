import type { FoundService } from './service';

/** Stops every service global-setup.ts started. */
export default async function globalTeardown(): Promise<void> {
  const started = (globalThis as { __icStarted?: FoundService[] }).__icStarted ?? [];
  await Promise.allSettled(started.map((s) => s.stop()));
}
