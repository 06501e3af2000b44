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
    expect(deadlines.idle).toBe(true);
    const a = command<string>();
    const b = command<string>();
    const guardedA = deadlines.guard(a.promise, mapped);
    const guardedB = deadlines.guard(b.promise, mapped);
    expect(deadlines.retained).toBe(2);
    b.reject(new Error('refused')); // out of order: the later command settles first
    await expect(guardedB).rejects.toThrow('mapped: refused');
    expect(deadlines.retained).toBe(2); // kept behind the older command still pending
    expect(deadlines.idle).toBe(false);
    a.resolve('ok');
    await expect(guardedA).resolves.toBe('ok');
    expect(deadlines.retained).toBe(0);
    expect(deadlines.idle).toBe(true);
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
    expect(deadlines.retained).toBe(0);
  });

  it('times out each command at its own deadline while the ones around it settle', async () => {
    const deadlines = new CommandDeadlines(300, timedOut);
    const first = command<string>();
    const guardedFirst = deadlines.guard(first.promise, mapped);
    first.resolve('fast');
    await expect(guardedFirst).resolves.toBe('fast');
    // Sent later: its deadline is later than the one the timer was armed for (the first command's), so
    // the timer fires, finds nothing due and re-arms for this one.
    await new Promise((resolve) => setTimeout(resolve, 20));
    const hung = command<string>();
    const hungAt = performance.now();
    const guardedHung = deadlines.guard(hung.promise, mapped);
    const after = command<string>();
    const guardedAfter = deadlines.guard(after.promise, mapped);
    after.resolve('behind a hung command');
    await expect(guardedAfter).resolves.toBe('behind a hung command');
    await expect(guardedHung).rejects.toThrow('timed out');
    expect(performance.now() - hungAt).toBeGreaterThanOrEqual(299);
    expect(deadlines.retained).toBe(0);
  });

  it('compacts the list once more than 1,024 commands settled and still times out the one after them', async () => {
    const deadlines = new CommandDeadlines(200, timedOut);
    const settled = Array.from({ length: 1_025 }, () => command<number>());
    const guardedSettled = settled.map((c) => deadlines.guard(c.promise, mapped));
    const hung = command<number>();
    const guardedHung = deadlines.guard(hung.promise, mapped);
    for (const [i, c] of settled.entries()) c.resolve(i);
    await Promise.all(guardedSettled);
    expect(deadlines.retained).toBe(1); // compacted down to the hung command, which is neither lost nor doubled
    await expect(guardedHung).rejects.toThrow('timed out');
    expect(deadlines.retained).toBe(0);
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
    expect(deadlines.retained).toBe(0);
  });
});
