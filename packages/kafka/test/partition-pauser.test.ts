import { KafkaEventEmitter } from '../src/events';
import { PartitionPauser } from '../src/partition-pauser';
import type { TopicPartitionsLike } from '../src/types';
import { FakeConsumer } from './fakes';

interface SubscriptionState {
  assign(topics: TopicPartitionsLike[]): void;
  pause(topics: TopicPartitionsLike[]): void;
  resume(topics: TopicPartitionsLike[]): void;
  paused(): { topic: string; partitions: number[] }[];
}

/** KafkaJS's own pause bookkeeping (`src/consumer/subscriptionState.js`, outside its typed API). */
const KafkaJsSubscriptionState: new () => SubscriptionState = require('kafkajs/src/consumer/subscriptionState');

/**
 * A consumer with KafkaJS's pause semantics (its `consumer.pause`, `resume` and `paused` forward to
 * `SubscriptionState` in the same way), assigned partitions 0 to 3 of `pay`.
 */
function kafkaJsConsumer() {
  const state = new KafkaJsSubscriptionState();
  state.assign([{ topic: 'pay', partitions: [0, 1, 2, 3] }]);
  return {
    state,
    pause: (topics: TopicPartitionsLike[]) => state.pause(topics),
    resume: (topics: TopicPartitionsLike[]) => state.resume(topics),
    paused: () => state.paused(),
  };
}

function setup() {
  const consumer = kafkaJsConsumer();
  const events = new KafkaEventEmitter();
  const brokerErrors: unknown[] = [];
  events.on('brokerError', (e) => brokerErrors.push(e));
  const pauser = new PartitionPauser(consumer, events);
  const paused = () => consumer.paused().find((t) => t.topic === 'pay')?.partitions ?? [];
  return { consumer, pauser, paused, brokerErrors };
}

describe('PartitionPauser and the application’s own pauses (KafkaJS semantics)', () => {
  afterEach(() => jest.useRealTimers());

  it('a partition whose resume at the end of its backoff failed is still the wrapper’s: the store wait’s end resumes it', () => {
    jest.useFakeTimers();
    const state = new KafkaJsSubscriptionState();
    state.assign([{ topic: 'pay', partitions: [0, 1, 2, 3] }]);
    let failResume = false;
    const consumer = {
      pause: (topics: TopicPartitionsLike[]) => state.pause(topics),
      resume: (topics: TopicPartitionsLike[]) => {
        if (failResume) throw new Error('the consumer is rejoining');
        state.resume(topics);
      },
      paused: () => state.paused(),
    };
    const events = new KafkaEventEmitter();
    const brokerErrors: unknown[] = [];
    events.on('brokerError', (e) => brokerErrors.push(e));
    const pauser = new PartitionPauser(consumer, events);
    const paused = () => state.paused().find((t) => t.topic === 'pay')?.partitions ?? [];
    pauser.pauseFor('pay', 2, 100);
    failResume = true;
    jest.advanceTimersByTime(100);
    failResume = false;
    expect(brokerErrors).toHaveLength(1);
    expect(paused()).toEqual([2]); // the resume failed
    pauser.pauseUntilStoreAnswers('pay', () => false);
    expect(pauser.resumeStoreTopics()).toEqual(['pay']);
    // Before: taken for a pause of the application's, partition 2 stayed paused for good.
    expect(paused()).toEqual([]);
    pauser.close();
  });

  it('the store wait pauses the whole topic; once the store answers, the partitions the application paused before or during it stay paused, one it resumed meanwhile does not', () => {
    const { consumer, pauser, paused } = setup();
    consumer.pause([{ topic: 'pay', partitions: [1, 3] }]);
    pauser.pauseUntilStoreAnswers('pay', () => false);
    expect(paused()).toEqual([0, 1, 2, 3]);
    consumer.pause([{ topic: 'pay', partitions: [2] }]); // alone, KafkaJS would resume 0, 1 and 3
    consumer.resume([{ topic: 'pay', partitions: [3] }]);
    expect(paused()).toEqual([0, 1, 2, 3]); // nothing of the topic is fetched while the store is down
    expect(pauser.resumeStoreTopics()).toEqual(['pay']);
    expect(paused()).toEqual([1, 2]);
  });

  it('a topic the application paused as a whole stays so; a backoff of a partition it resumed pauses that one only, until the backoff ends', () => {
    jest.useFakeTimers();
    const { consumer, pauser, paused } = setup();
    consumer.pause([{ topic: 'pay' }]);
    consumer.resume([{ topic: 'pay', partitions: [3] }]);
    pauser.pauseFor('pay', 3, 1000); // a plain pause of 3 would end KafkaJS's pause of the whole topic
    expect(paused()).toEqual([0, 1, 2, 3]);
    jest.advanceTimersByTime(1000);
    expect(paused()).toEqual([0, 1, 2]);
    pauser.pauseUntilStoreAnswers('pay', () => false);
    pauser.resumeStoreTopics();
    expect(paused()).toEqual([0, 1, 2]);
  });

  it('a backoff ends without resuming a partition the application paused before or during it; a resume of the application during it leaves it paused until it ends', () => {
    jest.useFakeTimers();
    const { consumer, pauser, paused } = setup();
    consumer.pause([{ topic: 'pay', partitions: [0] }]);
    pauser.pauseFor('pay', 0, 1000);
    pauser.pauseFor('pay', 1, 1000);
    pauser.pauseFor('pay', 2, 1000);
    consumer.pause([{ topic: 'pay', partitions: [1] }]);
    consumer.resume([{ topic: 'pay' }]); // the application's resume of all: its own pauses end, not the backoffs
    expect(paused()).toEqual([0, 1, 2]);
    consumer.pause([{ topic: 'pay', partitions: [0, 1] }]);
    jest.advanceTimersByTime(1000);
    expect(paused()).toEqual([0, 1]);
  });

  it('a pause the wrapper did not see made (through the original method) is read from consumer.paused() and kept', () => {
    jest.useFakeTimers();
    const { consumer, pauser, paused } = setup();
    consumer.state.pause([{ topic: 'pay', partitions: [2] }]);
    pauser.pauseUntilStoreAnswers('pay', () => false);
    pauser.resumeStoreTopics();
    expect(paused()).toEqual([2]);
    consumer.state.pause([{ topic: 'pay', partitions: [3] }]);
    pauser.pauseFor('pay', 3, 1000);
    jest.advanceTimersByTime(1000);
    expect(paused()).toEqual([2, 3]);
  });

  it('a call the consumer refuses is not recorded as a pause of the application', () => {
    const consumer = kafkaJsConsumer();
    let refuse = true;
    const { pause } = consumer;
    consumer.pause = (topics) => {
      if (refuse) throw new Error('refused');
      pause(topics);
    };
    const pauser = new PartitionPauser(consumer, new KafkaEventEmitter());
    expect(() => consumer.pause([{ topic: 'pay', partitions: [1] }])).toThrow('refused');
    refuse = false;
    pauser.pauseUntilStoreAnswers('pay', () => false);
    pauser.resumeStoreTopics();
    expect(consumer.paused()).toEqual([]);
  });

  it('close() gives the consumer its own pause and resume back', () => {
    const consumer = kafkaJsConsumer();
    const { pause, resume } = consumer;
    const pauser = new PartitionPauser(consumer, new KafkaEventEmitter());
    expect(consumer.pause).not.toBe(pause);
    const fake = new FakeConsumer();
    const fakePauser = new PartitionPauser(fake, new KafkaEventEmitter());
    expect(Object.hasOwn(fake, 'pause')).toBe(true);
    pauser.close();
    fakePauser.close();
    expect(consumer.pause).toBe(pause);
    expect(consumer.resume).toBe(resume);
    expect(Object.hasOwn(fake, 'pause')).toBe(false); // the prototype's method again
    expect(Object.hasOwn(fake, 'resume')).toBe(false);
  });
});
