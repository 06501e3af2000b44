import { SettledTags } from '../src/settled-tags';
import { seededRandom } from './seeded-random';

describe('SettledTags', () => {
  it('merges neighbours into runs and skips a run from its first tag', () => {
    const tags = new SettledTags();
    for (const tag of [5, 7, 6, 9, 3, 10]) tags.add(tag);
    expect(tags.runCount).toBe(3); // 3, 5..7, 9..10
    expect(tags.skipFrom(2)).toBe(2); // no run starts at 2
    expect(tags.skipFrom(3)).toBe(4);
    tags.add(4);
    expect(tags.skipFrom(4)).toBe(8); // 4 joined 5..7
    expect(tags.skipFrom(9)).toBe(11);
    expect(tags.runCount).toBe(0);
  });

  it('agrees with a plain set on random additions', () => {
    const random = seededRandom(7);
    for (let round = 0; round < 100; round++) {
      const tags = new SettledTags();
      const reference = new Set<number>();
      for (let i = 0; i < 200; i++) {
        const tag = 2 + Math.floor(random() * 300);
        tags.add(tag);
        reference.add(tag);
      }
      // Walk from 1 as DeliveryAcks does: every tag skipped must be in the reference, and the walk stops
      // at the first tag that is not.
      let lowest = 1;
      for (;;) {
        const next = tags.skipFrom(lowest);
        if (next === lowest) {
          if (!reference.has(lowest)) lowest++;
          else throw new Error(`tag ${lowest} recorded but not skipped`);
          if (lowest > 310) break;
          continue;
        }
        for (let t = lowest; t < next; t++) expect(reference.has(t)).toBe(true);
        expect(reference.has(next)).toBe(false);
        lowest = next;
      }
      expect(tags.runCount).toBe(0);
    }
  });
});
