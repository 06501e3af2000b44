/**
 * One demo consumer process. The orchestrator forks several; each receives an `init` message over IPC,
 * starts the broker module's consumer (with idempotent-consumer in `sdk` mode, without it in `naive`
 * mode), reports its counters every 200 ms, and stalls inside a handler when armed so that it can be
 * killed there with SIGKILL.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { Redis } from 'ioredis';
import type { DemoConsumerContext, DemoConsumerModule, PaymentMessage } from './broker';
import { loadConsumerModule } from './brokers';
import type { FromConsumer, ToConsumer } from './ipc';
import { zeroCounters } from './ipc';
import { recordCharge } from './ledger';

const send = (message: FromConsumer) => process.send?.(message);
const counters = zeroCounters();

/**
 * The kill is staged so that the only handler this process has open when it dies is the stalled one,
 * before its charge: SIGKILL then shows what a crash mid-handler does to the message (redelivered,
 * reclaimed as ACQUIRED_STALE once the lease lapses, charged once). A crash between a charge and the
 * COMPLETED write is the one window no consumer-side library can close (see the core README); staging
 * keeps the demo about what the SDK promises, and identical for both runs.
 */
const kill = {
  armed: false,
  /** Set once the victim handler is chosen: every later handler in this process waits here, uncharged. */
  gate: undefined as Promise<never> | undefined,
  /** Handler runs past the gate whose outcome is not yet written (SDK) or whose charge is not done (naive). */
  open: 0,
};

/** A transient failure of the payment gateway, thrown before anything is charged. */
class GatewayTimeoutError extends Error {
  override readonly name = 'GatewayTimeoutError';
}

async function main(init: Extract<ToConsumer, { type: 'init' }>): Promise<void> {
  const redis = new Redis(init.redisUrl, { enableAutoPipelining: true, maxRetriesPerRequest: 1 });
  let idempotency: Idempotency | undefined;
  if (init.mode === 'sdk') {
    const store = new RedisIdempotencyStore({ redis }, { keyPrefix: `demo:${init.runId}:idem` });
    idempotency = new Idempotency(
      { store },
      { leaseMs: init.leaseMs, retentionMs: 3_600_000, maxAttempts: 8 },
    );
    idempotency.on('outcome', ({ outcome }) => {
      if (outcome === 'DUPLICATE') counters.duplicatesSkipped++;
      else if (outcome === 'CONFLICT') counters.conflicts++;
    });
    idempotency.on('released', () => counters.retries++);
    for (const settled of ['completed', 'released', 'failed'] as const)
      idempotency.on(settled, () => kill.open--);
    idempotency.on('leaseLost', ({ during }) => {
      if (during === 'write') kill.open--;
    });
  }
  const context: DemoConsumerContext = {
    config: init.config,
    mode: init.mode,
    idempotency,
    redis,
    counters,
    async charge(message: PaymentMessage) {
      counters.handlerRuns++;
      if (kill.gate) await kill.gate;
      kill.open++;
      if (kill.armed) {
        kill.armed = false;
        kill.gate = new Promise<never>(() => {});
        while (kill.open > 1) await sleep(5); // let the other open handlers finish and record their outcome
        send({ type: 'in-handler', paymentId: message.paymentId, counters });
        await sleep(60_000); // the orchestrator kills this process here, mid-handler, before the charge
      }
      try {
        await sleep(2 + Math.random() * 6); // the payment gateway's latency
        if (Math.random() < init.failureRate) throw new GatewayTimeoutError('payment gateway timed out');
        await recordCharge(redis, init.runId, message.paymentId);
      } finally {
        if (init.mode === 'naive') kill.open--;
      }
    },
  };
  const module: DemoConsumerModule = await loadConsumerModule(init.broker);
  const consumer = await module.startConsumer(context);
  const timer = setInterval(() => send({ type: 'stats', counters }), 200);
  send({ type: 'ready' });
  process.on('message', async (message: ToConsumer) => {
    if (message.type === 'arm-kill') kill.armed = true;
    if (message.type === 'stop') {
      clearInterval(timer);
      await consumer.stop().catch(() => {});
      send({ type: 'stopped', counters });
      redis.disconnect();
      process.disconnect?.();
      setTimeout(() => process.exit(0), 100).unref();
    }
  });
}

process.once('message', (message: ToConsumer) => {
  if (message.type !== 'init') return;
  main(message).catch((error: Error) => {
    send({ type: 'error', message: error.stack ?? error.message });
    process.exit(1);
  });
});
