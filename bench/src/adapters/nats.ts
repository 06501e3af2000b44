import { randomUUID } from 'node:crypto';
import type { Idempotency } from '@idempotent-consumer/core';
import { NatsIdempotentConsumer } from '@idempotent-consumer/nats';
import { AckPolicy, type JsMsg, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import type { BareScripts } from '../bare-scripts';
import { BUSY } from '../contender';
import { type CpuMeter, findProcess } from '../cpu-meter';
import { type AdapterRow, row, settleCounter } from './adapter-row';

const CONCURRENCY = 64;

/**
 * NATS JetStream (`NATS_URL`, else 127.0.0.1:4222): `messages` messages with a `Nats-Msg-Id` in one fresh
 * stream, read by three durable pull consumers. `consume()` alone (64 in flight, ack after a no-op
 * handler) drains the first; the same loop with `scripts` claiming (with the data's fingerprint, as the
 * adapter's default) and completing each message around the handler (key: its `Nats-Msg-Id`) the second;
 * `NatsIdempotentConsumer` at concurrency 64 the third. `meter` reads the server's CPU time too when it
 * runs here (`nats-server`).
 */
export async function benchNats(
  idempotency: Idempotency,
  scripts: BareScripts,
  messages: number,
  meter: CpuMeter,
): Promise<AdapterRow> {
  const url = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const local = ['127.0.0.1', 'localhost', '[::1]'].includes(new URL(url).hostname);
  meter = meter.withBroker(local ? findProcess('nats-server') : undefined);
  const nc = await connect({ servers: url });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const stream = `bench_${process.pid}_${randomUUID().slice(0, 8)}`;
  try {
    await jsm.streams.add({ name: stream, subjects: [`${stream}.work`] });
    // The consumer checks at start that a stream captures its dead-letter subject (none is sent here).
    await jsm.streams.add({ name: `${stream}_dead`, subjects: [`${stream}.dead`] });
    for (const name of ['bare', 'scripts', 'sdk']) {
      await jsm.consumers.add(stream, { durable_name: name, ack_policy: AckPolicy.Explicit, ack_wait: 30e9 });
    }
    for (let i = 0; i < messages; i += 200) {
      const sends = Array.from({ length: Math.min(200, messages - i) }, (_, j) => {
        const h = headers();
        h.set('Nats-Msg-Id', `${stream}-${i + j}`);
        return js.publish(`${stream}.work`, `{"n":${i + j}}`, { headers: h });
      });
      await Promise.all(sends);
    }

    // consume() alone: 64 in flight, ack after `handle` resolved.
    const drain = async (durable: string, handle: (message: JsMsg) => Promise<unknown>) => {
      const counter = settleCounter(messages, meter);
      const pulled = await (await js.consumers.get(stream, durable)).consume({ max_messages: CONCURRENCY });
      let inFlight = 0;
      let wake: (() => void) | undefined;
      const loop = (async () => {
        for await (const message of pulled) {
          while (inFlight >= CONCURRENCY) await new Promise<void>((resolve) => (wake = resolve));
          inFlight += 1;
          handle(message).then(
            () => {
              message.ack();
              inFlight -= 1;
              wake?.();
              counter.settled();
            },
            (error: Error) => counter.fail(error),
          );
        }
      })();
      try {
        return await counter.done;
      } finally {
        pulled.stop();
        wake?.();
        await loop;
      }
    };
    const bareSettled = await drain('bare', async () => {});
    const scriptsSettled = await drain('scripts', async (message) => {
      const key = message.headers!.get('Nats-Msg-Id');
      if ((await scripts.process(key, async () => {}, message.data)) === BUSY) {
        throw new Error(`the claim of ${key} was not ACQUIRED`);
      }
    });

    const sdk = settleCounter(messages, meter);
    const consumer = new NatsIdempotentConsumer(
      { idempotency, jetstream: js },
      { stream, consumer: 'sdk', deadLetterSubject: `${stream}.dead`, concurrency: CONCURRENCY },
      async () => {},
    );
    consumer.on('settled', ({ decision }) => {
      if (decision.action === 'ack') sdk.settled();
    });
    await consumer.start();
    const sdkSettled = await sdk.done;
    await consumer.stop();
    return row('NATS', `concurrency ${CONCURRENCY}`, messages, {
      bare: bareSettled,
      scripts: scriptsSettled,
      sdk: sdkSettled,
    });
  } finally {
    for (const name of [stream, `${stream}_dead`]) await jsm.streams.delete(name).catch(() => {});
    await nc.close();
  }
}
