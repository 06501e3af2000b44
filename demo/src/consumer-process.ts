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
import { claimVictim } from './ledger';
import { openChargeWriter } from './side-effect';

const send = (message: FromConsumer) => process.send?.(message);
const counters = zeroCounters();

/**
 * The kill is staged so that the only handler this process has open when it dies is the stalled one,
 * before its charge: SIGKILL then shows what a crash mid-handler does to the message (redelivered,
 * reclaimed as ACQUIRED_STALE once the lease lapses, charged once). A crash between a charge and the
 * COMPLETED write is the one window no consumer-side library can close (docs/design.md); staging keeps the
 * demo about what the SDK promises, and identical for both runs. With a transactional side effect
 * (`--side-effect postgres`) that window is closed too, so the kill comes right after the charge's
 * transaction committed and before COMPLETED reaches Redis.
 *
 * Every consumer is armed; the first handler run after arming, in whichever process, claims the victim
 * role in Redis (`claimVictim`: exactly one wins per run), so a consumer is killed by construction,
 * whatever the broker's assignment of messages to processes.
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
  const redis = new Redis(init.redisUrl, { maxRetriesPerRequest: 1 });
  const writer = await openChargeWriter(
    { kind: init.sideEffect, runId: init.runId, sdk: init.mode === 'sdk', databaseUrl: init.databaseUrl },
    redis,
  );
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
    async charge(message: PaymentMessage, fencingToken?: number) {
      if (kill.gate) await kill.gate; // runs held here die with the victim before they start: not counted
      counters.handlerRuns++;
      kill.open++;
      const afterCommit = init.sideEffect === 'postgres'; // the charge is a database commit
      let victim = false;
      if (kill.armed) {
        kill.armed = false; // one candidate per process
        if (await claimVictim(redis, init.runId)) {
          victim = true;
          kill.gate = new Promise<never>(() => {});
          while (kill.open > 1) await sleep(5); // let the other open handlers finish and record their outcome
          if (!afterCommit) {
            send({ type: 'in-handler', paymentId: message.paymentId, counters, afterCommit });
            await sleep(600_000); // the orchestrator kills this process here, mid-handler, before the charge
          }
        }
      }
      try {
        await sleep(2 + Math.random() * 6); // the payment gateway's latency
        if (!victim && Math.random() < init.failureRate) {
          counters.gatewayTimeouts++;
          throw new GatewayTimeoutError('payment gateway timed out');
        }
        await writer.charge(message, fencingToken);
        if (victim) {
          send({ type: 'in-handler', paymentId: message.paymentId, counters, afterCommit });
          await sleep(600_000); // killed here: the charge committed, COMPLETED not yet written
        }
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
      await writer.close().catch(() => {});
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
