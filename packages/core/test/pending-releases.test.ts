import { MAX_PENDING_RELEASES, type PendingRelease, PendingReleases } from '../src/store/pending-releases';

/** A send whose answer the test gives: resolve (answered) or reject (not answered). */
function sender() {
  const sent: { release: PendingRelease; answer: () => void; fail: () => void }[] = [];
  const send = (release: PendingRelease) =>
    new Promise<void>((resolve, reject) => {
      sent.push({ release, answer: resolve, fail: () => reject(new Error('connection lost')) });
    });
  return { sent, send };
}
const flush = () => new Promise((r) => setImmediate(r));

describe('PendingReleases: the releases a store owes until Redis answers them', () => {
  it('a release added is due (onDue, not again); sent once; done once answered', async () => {
    const dues: boolean[] = [];
    const pending = new PendingReleases((again) => dues.push(again));
    pending.add({ key: 'k', retentionMs: 1000, nonce: 'n1' });
    expect(dues).toEqual([false]);
    expect(pending.due).toBe(true);
    const { sent, send } = sender();
    pending.sendDue(send);
    pending.sendDue(send); // on its way: not written twice
    expect(sent.map((s) => s.release)).toEqual([{ key: 'k', retentionMs: 1000, nonce: 'n1' }]);
    expect(pending.due).toBe(false);
    expect(pending.size).toBe(1);
    sent[0]!.answer();
    await flush();
    expect(pending.size).toBe(0);
  });

  it('one not answered is owed again (onDue again) and sent again, in the order they were added', async () => {
    const dues: boolean[] = [];
    const pending = new PendingReleases((again) => dues.push(again));
    pending.add({ key: 'a', retentionMs: 1, nonce: 'x' });
    pending.add({
      key: 'b',
      retentionMs: 1,
      fencingToken: 7,
      abandoned: true,
      neverStarted: true,
    });
    const { sent, send } = sender();
    pending.sendDue(send);
    sent[0]!.fail();
    sent[1]!.answer();
    await flush();
    expect(dues).toEqual([false, false, true]);
    expect(pending.due).toBe(true);
    expect(pending.size).toBe(1);
    pending.sendDue(send);
    expect(sent.map((s) => s.release.key)).toEqual(['a', 'b', 'a']);
  });

  it('a send that throws before writing is dropped (it would throw again)', () => {
    const pending = new PendingReleases(() => {});
    pending.add({ key: 'k', retentionMs: 1, nonce: 'n' });
    pending.sendDue(() => {
      throw new Error('bad argument');
    });
    expect(pending.size).toBe(0);
    expect(pending.due).toBe(false);
  });

  it(`keeps at most ${MAX_PENDING_RELEASES}: the oldest is dropped first`, () => {
    const pending = new PendingReleases(() => {});
    for (let i = 0; i <= MAX_PENDING_RELEASES; i++) pending.add({ key: `k${i}`, retentionMs: 1, nonce: 'n' });
    expect(pending.size).toBe(MAX_PENDING_RELEASES);
    const keys: string[] = [];
    pending.sendDue((release) => {
      keys.push(release.key);
      return new Promise(() => {});
    });
    expect(keys[0]).toBe('k1');
    expect(keys).toHaveLength(MAX_PENDING_RELEASES);
  });

  it("nonces are distinct within a store and between stores, and fit lua/claim.lua (1 to 64 bytes, no ':')", () => {
    const a = new PendingReleases(() => {});
    const b = new PendingReleases(() => {});
    const nonces = [a.nonce(), a.nonce(), b.nonce(), b.nonce()];
    expect(new Set(nonces).size).toBe(4);
    for (const nonce of nonces) expect(nonce).toMatch(/^[\w-]{1,64}$/);
  });
});
