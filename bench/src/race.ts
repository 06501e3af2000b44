import { setTimeout as sleep } from 'node:timers/promises';
import { BUSY, type Contender } from './contender';

/** What happened when `callers` callers raced on each of `keys` keys. */
export interface RaceResult {
  readonly keys: number;
  readonly callers: number;
  /** Handler runs in total; a layer that runs each key once has `runs === keys`. */
  readonly runs: number;
  /** Keys whose handler ran more than once. */
  readonly keysRunTwice: number;
  /** Calls that found the key held by another caller (CONFLICT, in progress, lock timeout). */
  readonly busy: number;
  /** Calls that rejected. */
  readonly errors: number;
}

/**
 * `callers` callers race on each of `keys` keys, spread round-robin over the contender instances (one
 * connection each), all started before any finishes. The handler takes `handlerMs` so that the calls overlap.
 */
export async function race(
  instances: readonly Contender[],
  keyPrefix: string,
  keys: number,
  callers: number,
  handlerMs = 5,
): Promise<RaceResult> {
  const runs = new Map<string, number>();
  let busy = 0;
  let errors = 0;
  const calls: Promise<void>[] = [];
  for (let k = 0; k < keys; k++) {
    const key = `${keyPrefix}-${k}`;
    const handler = async () => {
      runs.set(key, (runs.get(key) ?? 0) + 1);
      await sleep(handlerMs);
      return { key };
    };
    for (let c = 0; c < callers; c++) {
      const contender = instances[(k * callers + c) % instances.length]!;
      calls.push(
        contender.process(key, handler).then(
          (r) => {
            if (r === BUSY) busy++;
          },
          () => {
            errors++;
          },
        ),
      );
    }
  }
  await Promise.all(calls);
  let total = 0;
  let twice = 0;
  for (const n of runs.values()) {
    total += n;
    if (n > 1) twice++;
  }
  return { keys, callers, runs: total, keysRunTwice: twice, busy, errors };
}

/** Whose result a later duplicate got after the owner stalled past its lease and finished last. */
export type StalledOwnerVerdict = 'taker' | 'owner' | 'none (no result stored)' | 'ran again';

/**
 * The owner claims a key and stalls in its handler past its lease (or lock, or in-progress window) of
 * `leaseMs`; a taker then processes the same key to the end (result `taker`); then the owner's handler
 * returns `owner`, last. A later duplicate shows whose result the layer kept.
 *
 * @param owner the contender the owner uses (configured with the short lease; for ours, with heartbeats
 *   that do not arrive while the owner stalls)
 * @param unstall called when the owner's handler resumes, before it returns
 */
export async function stalledOwner(
  owner: Contender,
  taker: Contender,
  key: string,
  leaseMs: number,
  unstall: () => void = () => {},
): Promise<StalledOwnerVerdict> {
  let resume!: () => void;
  const resumed = new Promise<void>((r) => {
    resume = r;
  });
  let started!: () => void;
  const ownerStarted = new Promise<void>((r) => {
    started = r;
  });
  const owned = owner.process(key, async () => {
    started();
    await resumed;
    return 'owner';
  });
  await ownerStarted;
  await sleep(leaseMs + 300);
  const took = await taker.process(key, async () => 'taker');
  if (took !== 'taker') throw new Error(`The taker did not run after the owner's lease: ${String(took)}`);
  unstall();
  resume();
  await owned.catch(() => undefined);
  const later = await taker.process(key, async () => 'ran again');
  if (later === 'taker' || later === 'owner' || later === 'ran again') return later;
  if (later === undefined) return 'none (no result stored)';
  throw new Error(`Unexpected duplicate reply ${String(later)}`);
}
