import type { ConsumeMessage } from 'amqplib';
import type { ConsumeChannel } from '../src/amqp-types';
import { DeliveryAcks } from '../src/delivery-acks';
import { FakeChannel } from './fake-amqp';
import { seededRandom } from './seeded-random';

/** A channel with a registered consumer that keeps what it was delivered, and its acks. */
function setup() {
  const channel = new FakeChannel([]);
  const delivered: ConsumeMessage[] = [];
  channel.onMessage = (message) => {
    if (message) delivered.push(message);
  };
  const deliver = (n: number) => Array.from({ length: n }, (_, i) => channel.deliver(`{"n":${i}}`));
  return { channel, delivered, deliver, acks: new DeliveryAcks(channel as unknown as ConsumeChannel) };
}

const endOfTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('DeliveryAcks', () => {
  it('sends the acks of one turn as one multiple ack', async () => {
    const { channel, deliver, acks } = setup();
    const [a, b, c] = deliver(3);
    acks.ack(b!);
    acks.ack(a!);
    acks.ack(c!);
    expect(channel.acked).toEqual([]); // not before the end of the turn
    await endOfTurn();
    expect(channel.acked).toEqual([1, 2, 3]);
    expect(channel.ackFrames).toBe(1);
  });

  it('never covers a delivery still being handled: acks past it go alone', async () => {
    const { channel, deliver, acks } = setup();
    const [a, b, c, d] = deliver(4);
    acks.ack(a!);
    acks.ack(c!);
    acks.ack(d!);
    await endOfTurn();
    expect(channel.acked).toEqual([1, 3, 4]); // 2 is still outstanding
    expect(channel.ackFrames).toBe(3);
    acks.ack(b!);
    await endOfTurn();
    expect(channel.acked).toEqual([1, 3, 4, 2]);
    // The run passed the tags acked alone: the next turn's acks start from 5 again.
    const [e, f] = deliver(2);
    acks.ack(f!);
    acks.ack(e!);
    await endOfTurn();
    expect(channel.acked).toEqual([1, 3, 4, 2, 5, 6]);
    expect(channel.ackFrames).toBe(5);
  });

  it('passes a nacked tag: a multiple ack does not cover it again', async () => {
    const { channel, deliver, acks } = setup();
    const [a, b, c] = deliver(3);
    acks.nack(b!); // at once
    expect(channel.nacked).toEqual([{ tag: 2, requeue: true }]);
    acks.ack(a!);
    acks.ack(c!);
    await endOfTurn();
    expect(channel.acked).toEqual([1, 3]);
    expect(channel.ackFrames).toBe(1);
  });

  it('flush() sends what waits at once (before a close)', () => {
    const { channel, deliver, acks } = setup();
    const [a, b] = deliver(2);
    acks.ack(a!);
    acks.ack(b!);
    acks.flush();
    expect(channel.acked).toEqual([1, 2]);
  });

  it('a channel closed before the end of the turn: the acks are dropped, nothing throws', async () => {
    const { channel, deliver, acks } = setup();
    const [a] = deliver(1);
    channel.ack = () => {
      throw new Error('Channel closed');
    };
    acks.ack(a!);
    await endOfTurn(); // an uncaught throw here would fail the test
    expect(channel.acked).toEqual([]);
  });

  it('keeps coalescing, in bounded memory, when one delivery is held while thousands are acked', async () => {
    const { channel, deliver, acks } = setup();
    const [held, ...rest] = deliver(5000);
    for (const message of rest) {
      acks.ack(message);
      await endOfTurn(); // one ack per turn: each goes alone (tag 1 is still held), remembered as settled
    }
    expect(channel.acked).toHaveLength(4999);
    expect(acks.settledRuns).toBe(1); // tags 2..5000: one run, not 4,999 numbers
    acks.ack(held!);
    await endOfTurn();
    expect(channel.acked).toHaveLength(5000);
    expect(new Set(channel.acked).size).toBe(5000);
    expect(acks.settledRuns).toBe(0);
    // Still coalescing: the next window's acks leave in one frame.
    const frames = channel.ackFrames;
    for (const message of deliver(64)) acks.ack(message);
    await endOfTurn();
    expect(channel.ackFrames).toBe(frames + 1);
  });

  it('random interleavings: every delivery settled once, none acked before it was settled here', async () => {
    const random = seededRandom(42);
    for (let round = 0; round < 50; round++) {
      const { channel, delivered, deliver, acks } = setup();
      const settledHere = new Set<number>();
      const open: ConsumeMessage[] = [];
      let sent = 0;
      while (sent < 300 || open.length > 0) {
        if (sent < 300 && open.length < 64 && random() < 0.6) {
          open.push(...deliver(1 + Math.floor(random() * 5)));
          sent = delivered.length;
        }
        // Settle some of the open deliveries, in any order, within this turn.
        for (let i = open.length - 1; i >= 0; i--) {
          if (random() < 0.3) {
            const [message] = open.splice(i, 1);
            settledHere.add(message!.fields.deliveryTag);
            if (random() < 0.1) acks.nack(message!);
            else acks.ack(message!);
          }
        }
        if (random() < 0.7) await endOfTurn();
        const early = channel.acked.filter((tag) => !settledHere.has(tag));
        if (early.length > 0) throw new Error(`acked before settled here: ${early.join(', ')}`);
      }
      await endOfTurn();
      const settled = [...channel.acked, ...channel.nacked.map((n) => n.tag)].sort((a, b) => a - b);
      expect(settled).toEqual(delivered.map((m) => m.fields.deliveryTag));
      expect(channel.ackFrames).toBeLessThan(channel.acked.length);
    }
    // 50 rounds of 300 deliveries, all CPU: 0.7 s alone, 5 s (Jest's default limit, which failed it) with
    // both Node runs of `npm test` beside each other on a loaded 2-core machine. Time is not what it checks.
  }, 60_000);
});
