import { EventEmitter } from 'node:events';
import { OutcomeNotifications } from '../src/store/outcome-notifications';
import type { RedisClient } from '../src/store/redis-client';

/**
 * A stand-in for ioredis whose SSUBSCRIBE answers when the test says so (the real subscriber is covered
 * on Redis by integration-tests/src/core/store-contract.redis.test.ts); here: what every listener sees
 * when the subscription fails.
 */
function fakeClient(options: { keyPrefix?: string } = {}) {
  const pending: { resolve: () => void; reject: (e: Error) => void; channel: string }[] = [];
  const subscriber = Object.assign(new EventEmitter(), {
    ssubscribe: (channel: string) =>
      new Promise<void>((resolve, reject) => pending.push({ resolve, reject, channel })),
    sunsubscribe: async () => {},
    disconnect: jest.fn(),
  });
  const redis = { isCluster: false, options, duplicate: () => subscriber } as unknown as RedisClient;
  return { redis, subscriber, pending };
}

describe('OutcomeNotifications', () => {
  it('a failed subscription rejects every listener of the channel, and the next listener subscribes again', async () => {
    const { redis, pending } = fakeClient();
    const notifications = new OutcomeNotifications(redis, { subscribeTimeoutMs: 10_000, idleMs: 1000 });
    const first = notifications.listen('k', () => {});
    const second = notifications.listen('k', () => {});
    expect(pending).toHaveLength(1); // one SSUBSCRIBE per channel
    pending[0]!.reject(new Error('no subscription'));
    await expect(first).rejects.toThrow('no subscription');
    await expect(second).rejects.toThrow('no subscription'); // not "subscribed" on a failed subscription
    const third = notifications.listen('k', () => {});
    expect(pending).toHaveLength(2);
    pending[1]!.resolve();
    await expect(third).resolves.toEqual(expect.any(Function));
    notifications.close();
  });

  it('every listener waits for the subscription to be confirmed', async () => {
    const { redis, pending } = fakeClient();
    const notifications = new OutcomeNotifications(redis, { subscribeTimeoutMs: 10_000, idleMs: 1000 });
    let secondSettled = false;
    void notifications.listen('k', () => {});
    const second = notifications
      .listen('k', () => {})
      .then((stop) => {
        secondSettled = true;
        return stop;
      });
    await new Promise((r) => setImmediate(r));
    expect(secondSettled).toBe(false);
    pending[0]!.resolve();
    await second;
    expect(secondSettled).toBe(true);
    notifications.close();
  });

  it("a notification on the client's keyPrefix-ed channel wakes the listeners of the record key", async () => {
    const { redis, subscriber, pending } = fakeClient({ keyPrefix: 'app:' });
    const notifications = new OutcomeNotifications(redis, { subscribeTimeoutMs: 10_000, idleMs: 1000 });
    const wake = jest.fn();
    const listening = notifications.listen('idem:s:k', wake);
    pending[0]!.resolve();
    const stop = await listening;
    subscriber.emit('smessage', 'app:idem:s:k', 'C');
    expect(wake).toHaveBeenCalledTimes(1);
    stop();
    subscriber.emit('smessage', 'app:idem:s:k', 'C');
    expect(wake).toHaveBeenCalledTimes(1);
    notifications.close();
  });

  it('closes the subscriber idleMs after a listener whose subscription failed (the idle timer is re-armed)', async () => {
    jest.useFakeTimers();
    try {
      const { redis, subscriber, pending } = fakeClient();
      const notifications = new OutcomeNotifications(redis, { subscribeTimeoutMs: 10_000, idleMs: 1000 });
      const listening = notifications.listen('k', () => {});
      pending[0]!.reject(new Error('no subscription within 1000 ms'));
      await expect(listening).rejects.toThrow('no subscription');
      expect(subscriber.disconnect).not.toHaveBeenCalled();
      jest.advanceTimersByTime(1000);
      expect(subscriber.disconnect).toHaveBeenCalledTimes(1);
    } finally {
      jest.useRealTimers();
    }
  });
});
