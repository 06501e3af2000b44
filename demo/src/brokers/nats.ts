/**
 * The demo on NATS JetStream: the producer publishes payment messages with `Nats-Msg-Id` = idempotency
 * key to a stream of the run; each consumer process pulls from one durable consumer with
 * `@idempotent-consumer/nats` (`sdk`) or with a plain fetch loop that acks after the charge (`naive`).
 * JetStream drops a repeated `Nats-Msg-Id` only within the stream's duplicate window (2 minutes by
 * default). The run's stream keeps it for 100 ms, its least, and a repeat of a payment is published
 * after that: a producer's retry or an outbox replay that comes later than the window, in one run.
 */
import { redactUrl } from '@idempotent-consumer/core/tools';
import { NatsIdempotentConsumer } from '@idempotent-consumer/nats';
import {
  AckPolicy,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { headers, type NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import type { DemoBroker, DemoConsumerContext, DemoMode, PaymentMessage } from '../broker';

/** Where NATS is: `NATS_URL`, else the local default. */
const natsUrl = () => process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/** The durable consumer every consumer process pulls from. */
const DURABLE = 'charges';

const parse = (message: JsMsg) => message.json<PaymentMessage>();

/** The producer side: one work stream and one dead-letter stream per run. */
export function natsBroker(): DemoBroker {
  let nc: NatsConnection | undefined;
  let jsm: JetStreamManager | undefined;
  let names: { stream: string; subject: string } | undefined;
  /** When each payment of the run was stored, across the orchestrator's publish calls. */
  const storedAt = new Map<string, number>();

  return {
    name: 'nats',
    async preflight() {
      try {
        nc = await connect({ servers: natsUrl(), timeout: 3000 });
        jsm = await jetstreamManager(nc);
        return null;
      } catch (error) {
        return `NATS with JetStream is not reachable at ${redactUrl(natsUrl())} (${(error as Error).message}); start it with \`nats-server -js -a 127.0.0.1\` or set NATS_URL`;
      }
    },
    async setup(runId: string, _mode: DemoMode) {
      if (!jsm) throw new Error('preflight() first');
      const stream = `demo_${runId}`.replace(/[^A-Za-z0-9_-]/g, '_');
      const subject = `demo.${stream}.payments`;
      names = { stream, subject };
      storedAt.clear();
      await jsm.streams.add({ name: stream, subjects: [subject], duplicate_window: 100e6 });
      await jsm.streams.add({ name: `${stream}_dead`, subjects: [`${subject}.dead`] });
      // ack_wait is the demo's default lease; an sdk consumer with another lease sets it to its own.
      await jsm.consumers.add(stream, {
        durable_name: DURABLE,
        ack_policy: AckPolicy.Explicit,
        ack_wait: 3e9,
      });
      return { natsUrl: natsUrl(), stream, subject };
    },
    async publish(messages: readonly PaymentMessage[]) {
      if (!nc || !names) throw new Error('setup() first');
      const js = jetstream(nc);
      const subject = names.subject;
      // In the stream's order, 100 at a time. A repeat waits until 300 ms after its payment was stored:
      // the server forgets ids on a timer, and at 150 ms it still dropped 3 of 500 repeats.
      let chunk: PaymentMessage[] = [];
      const flush = async () => {
        await Promise.all(
          chunk.map(async (m) => {
            const h = headers();
            h.set('Nats-Msg-Id', m.idempotencyKey);
            await js.publish(subject, JSON.stringify(m), { headers: h });
            storedAt.set(m.idempotencyKey, performance.now());
          }),
        );
        chunk = [];
      };
      for (const m of messages) {
        if (chunk.length === 100 || chunk.some((c) => c.idempotencyKey === m.idempotencyKey)) await flush();
        const waitMs = (storedAt.get(m.idempotencyKey) ?? Number.NEGATIVE_INFINITY) + 300 - performance.now();
        if (waitMs > 0) {
          await flush();
          await new Promise((resolve) => setTimeout(resolve, waitMs));
        }
        chunk.push(m);
      }
      await flush();
    },
    async teardown() {
      const run = names;
      names = undefined;
      if (!run || !jsm) return;
      for (const name of [run.stream, `${run.stream}_dead`]) await jsm.streams.delete(name).catch(() => {});
    },
    async close() {
      await nc?.close().catch(() => {});
      nc = undefined;
      jsm = undefined;
    },
  };
}

/** The consumer side, in one consumer process. */
export async function startConsumer(context: DemoConsumerContext): Promise<{ stop(): Promise<void> }> {
  const { stream, subject } = context.config;
  if (!stream || !subject) throw new Error('The nats demo consumer needs config.stream and config.subject');
  const nc = await connect({ servers: context.config.natsUrl ?? natsUrl() });
  const js = jetstream(nc);
  const { counters } = context;

  if (context.mode === 'sdk') {
    if (!context.idempotency) throw new Error('sdk mode needs context.idempotency');
    const leaseMs = context.idempotency.options.leaseMs;
    if (leaseMs !== 3000) {
      await (await jetstreamManager(nc)).consumers.update(stream, DURABLE, { ack_wait: leaseMs * 1e6 });
    }
    const consumer = new NatsIdempotentConsumer(
      { idempotency: context.idempotency, jetstream: js },
      {
        stream,
        consumer: DURABLE,
        deadLetterSubject: `${subject}.dead`,
        concurrency: 8,
        retryBackoff: { baseMs: 250, factor: 2, maxMs: 2000 },
        storeProbeBackoff: { baseMs: 250, maxMs: 250 },
      },
      async ({ message, fencingToken }) => {
        await context.charge(parse(message), fencingToken);
      },
    );
    consumer.on('settled', () => counters.deliveries++);
    consumer.on('deadLettered', () => counters.deadLettered++);
    await consumer.start();
    return {
      async stop() {
        await consumer.stop();
        await nc.close().catch(() => {});
      },
    };
  }

  // naive: fetch, charge, ack; on an error nak at once.
  const pulls = await js.consumers.get(stream, DURABLE);
  let stopping = false;
  const inFlight = new Set<Promise<void>>();
  const loop = (async () => {
    while (!stopping) {
      try {
        for await (const message of await pulls.fetch({ max_messages: 8 - inFlight.size, expires: 1000 })) {
          counters.deliveries++;
          const task = context.charge(parse(message)).then(
            () => message.ack(),
            () => message.nak(),
          );
          inFlight.add(task);
          void task.finally(() => inFlight.delete(task));
        }
      } catch {
        if (!stopping) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      while (inFlight.size >= 8) await Promise.race(inFlight);
    }
  })();
  return {
    async stop() {
      stopping = true;
      await loop;
      await Promise.allSettled([...inFlight]);
      await nc.close().catch(() => {});
    },
  };
}
