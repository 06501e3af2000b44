import type { DemoCounters, DemoMode } from './broker';

/** Orchestrator → consumer process. */
export type ToConsumer =
  | {
      type: 'init';
      broker: string;
      mode: DemoMode;
      runId: string;
      config: Record<string, string>;
      redisUrl: string;
      leaseMs: number;
      failureRate: number;
    }
  /** The next handler run announces itself (`in-handler`) and then stalls, so the orchestrator can SIGKILL it. */
  | { type: 'arm-kill' }
  | { type: 'stop' };

/** Consumer process → orchestrator. */
export type FromConsumer =
  | { type: 'ready' }
  | { type: 'stats'; counters: DemoCounters }
  | { type: 'in-handler'; paymentId: string; counters: DemoCounters }
  | { type: 'stopped'; counters: DemoCounters }
  | { type: 'error'; message: string };

/** Counters all at zero. */
export function zeroCounters(): DemoCounters {
  return { deliveries: 0, handlerRuns: 0, duplicatesSkipped: 0, conflicts: 0, retries: 0, deadLettered: 0 };
}
