/**
 * Delivery tags settled above the lowest unsettled one, kept as sorted runs of consecutive tags
 * (`[first, last]`): deliveries settle mostly in order, so the runs stay few. There is one run more than
 * there are unsettled tags between them, and a channel has at most `prefetch` deliveries unsettled, so the
 * memory is bounded by the prefetch window however many deliveries pass a long-held one.
 */
export class SettledTags {
  /** Disjoint, non-adjacent runs `[first, last]`, sorted by `first`. */
  readonly #runs: [number, number][] = [];

  /** Records `tag` as settled. */
  add(tag: number): void {
    const runs = this.#runs;
    // The first run that starts after `tag` (runs are appended at the end in the usual, in-order case).
    let i = runs.length;
    while (i > 0 && runs[i - 1]![0] > tag) i--;
    const before = runs[i - 1];
    const after = runs[i];
    if (before && tag <= before[1]) return; // already recorded
    const joinsBefore = before !== undefined && before[1] + 1 === tag;
    const joinsAfter = after !== undefined && after[0] - 1 === tag;
    if (joinsBefore && joinsAfter) {
      before[1] = after[1];
      runs.splice(i, 1);
    } else if (joinsBefore) {
      before[1] = tag;
    } else if (joinsAfter) {
      after[0] = tag;
    } else {
      runs.splice(i, 0, [tag, tag]);
    }
  }

  /**
   * When a run starts at `tag`, removes it and returns the tag just after it; otherwise returns `tag`.
   * (Callers pass the lowest unsettled tag, so no run starts below it.)
   */
  skipFrom(tag: number): number {
    const first = this.#runs[0];
    if (first === undefined || first[0] !== tag) return tag;
    this.#runs.shift();
    return first[1] + 1;
  }

  /** How many runs are kept (for tests: bounded by the unsettled tags between them). */
  get runCount(): number {
    return this.#runs.length;
  }
}
