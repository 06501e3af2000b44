import { performance } from 'node:perf_hooks';
import { CommandDeadlines } from '../src/store/command-deadlines';

/** A command whose reply the test controls. */
function command<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const timedOut = () => new Error('timed out');
const mapped = (error: unknown) => new Error(`mapped: ${(error as Error).message}`);

describe('CommandDeadlines (one timer for every command of a store)', () => {
  it('passes replies and mapped errors through, and keeps nothing once all have settled', async () => {
    const deadlines = new CommandDeadlines(1_000, timedOut);
    const a = command<string>();
    const b = command<string>();
    const guardedA = deadlines.guard(a.promise, mapped);
    const guardedB = deadlines.guard(b.promise, mapped);
    expect(deadlines.pending).toBe(2);
    b.reject(new Error('refused')); // out of order: the later command settles first
    a.resolve('ok');
    await expect(guardedA).resolves.toBe('ok');
    await expect(guardedB).rejects.toThrow('mapped: refused');
    expect(deadlines.pending).toBe(0);
  });

  it('rejects a command that does not settle at its deadline, not before, and ignores its late reply', async () => {
    const deadlines = new CommandDeadlines(60, timedOut);
    const slow = command<string>();
    const sentAt = performance.now();
    const guarded = deadlines.guard(slow.promise, mapped);
    await expect(guarded).rejects.toThrow('timed out');
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(59);
    slow.resolve('late');
    await slow.promise;
    expect(deadlines.pending).toBe(0);
  });

  it('times out each command at its own deadline while the ones around it settle', async () => {
    const deadlines = new CommandDeadlines(80, timedOut);
    const first = command<string>();
    const guardedFirst = deadlines.guard(first.promise, mapped);
    const settledFirst = guardedFirst.then(
      () => 'resolved',
      () => 'rejected',
    );
    first.resolve('fast');
    expect(await settledFirst).toBe('resolved');
    // Sent later: its deadline is later than the timer armed for the first command.
    await new Promise((resolve) => setTimeout(resolve, 40));
    const hung = command<string>();
    const hungAt = performance.now();
    const guardedHung = deadlines.guard(hung.promise, mapped);
    const after = command<string>();
    const guardedAfter = deadlines.guard(after.promise, mapped);
    after.resolve('behind a hung command');
    await expect(guardedAfter).resolves.toBe('behind a hung command');
    await expect(guardedHung).rejects.toThrow('timed out');
    expect(performance.now() - hungAt).toBeGreaterThanOrEqual(79);
    expect(deadlines.pending).toBe(0);
  });

  it('keeps many commands in flight and settles every one of them exactly once', async () => {
    const deadlines = new CommandDeadlines(5_000, timedOut);
    const commands = Array.from({ length: 5_000 }, () => command<number>());
    const guarded = commands.map((c) => deadlines.guard(c.promise, mapped));
    commands.forEach((c, i) => {
      if (i % 7 === 0) c.reject(new Error(String(i)));
      else c.resolve(i);
    });
    const results = await Promise.allSettled(guarded);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5_000 - Math.ceil(5_000 / 7));
    expect(deadlines.pending).toBe(0);
  });
});
