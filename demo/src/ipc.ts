import type { DemoCounters, DemoMode } from './broker';
import type { SideEffectKind } from './side-effect-contract';

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
      sideEffect: SideEffectKind;
      databaseUrl: string;
    }
  /**
   * Sent to every consumer: the next handler run in any of them claims the victim role in Redis (one wins),
   * announces itself (`in-handler`) and stalls, so the orchestrator can SIGKILL it there.
   */
  | { type: 'arm-kill' }
  | { type: 'stop' };

/** Consumer process → orchestrator. */
export type FromConsumer =
  | { type: 'ready' }
  | { type: 'stats'; counters: DemoCounters }
  /** `afterCommit`: the charge is committed (transactional side effect) and COMPLETED is not written yet. */
  | { type: 'in-handler'; paymentId: string; counters: DemoCounters; afterCommit: boolean }
  | { type: 'stopped'; counters: DemoCounters }
  | { type: 'error'; message: string };

/** Counters all at zero. */
export function zeroCounters(): DemoCounters {
  return {
    deliveries: 0,
    handlerRuns: 0,
    gatewayTimeouts: 0,
    duplicatesSkipped: 0,
    conflicts: 0,
    retries: 0,
    deadLettered: 0,
  };
}
