/**
 * The same sequence of script calls on the two forms of the model: scripts.pml, run by spin's simulator
 * (one generated harness for the whole sequence), and record-model.ts, the oracle of the model-based
 * tests. Both print what each call answered and the record after it in record.pml's trace format
 * (`@reply`, `@record`), so that the test can compare them line by line.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RecordState } from '@idempotent-consumer/core';
import { type ModelRecord, RecordModel } from './record-model';
import { MODEL_DIR } from './spin';
import { KINDS } from './trace';

/** One call: a script with its arguments (tokens by the order they were issued; 0 for none). */
export type ReplayStep =
  | { op: 'claim'; fingerprint: 0 | 1 | 2; maxAttempts: number; reserve: boolean }
  | { op: 'start' | 'extend' | 'mark-dead-lettered'; token: number }
  | { op: 'complete'; token: number; withResult: boolean }
  | { op: 'release'; token: number; abandoned: boolean; neverStarted: boolean }
  | { op: 'fail'; token: number; abandoned: boolean }
  | { op: 'admin-release'; token: number; state: 0 | 1 | 4 }
  | { op: 'admin-purge'; states: number }
  | { op: 'lapse' | 'lose' };

const OPS = [
  'claim',
  'start',
  'extend',
  'complete',
  'release',
  'fail',
  'mark-dead-lettered',
  'admin-release',
  'admin-purge',
  'lapse',
  'lose',
] as const;
const STATES: readonly (RecordState | undefined)[] = [
  undefined,
  'IN_PROGRESS',
  'COMPLETED',
  'RELEASED',
  'FAILED',
];
const FINGERPRINTS = ['', 'a'.repeat(64), 'b'.repeat(64)];
const PURGE_BITS: readonly [RecordState, number][] = [
  ['IN_PROGRESS', 1],
  ['COMPLETED', 2],
  ['RELEASED', 4],
  ['FAILED', 8],
];

/** The three numbers of a step for the harness. */
function argsOf(step: ReplayStep): [number, number, number] {
  switch (step.op) {
    case 'claim':
      return [step.fingerprint, step.maxAttempts, step.reserve ? 1 : 0];
    case 'complete':
      return [step.token, step.withResult ? 1 : 0, 0];
    case 'release':
      return [step.token, step.abandoned ? 1 : 0, step.neverStarted ? 1 : 0];
    case 'fail':
      return [step.token, step.abandoned ? 1 : 0, 0];
    case 'admin-release':
      return [step.token, step.state, 0];
    case 'admin-purge':
      return [step.states, 0, 0];
    case 'lapse':
    case 'lose':
      return [0, 0, 0];
    default:
      return [step.token, 0, 0];
  }
}

/** Runs the steps on scripts.pml in spin's simulator; the `@reply` and `@record` lines, in order. */
export function replayInSpin(steps: readonly ReplayStep[]): string[] {
  const n = steps.length;
  const assignments = steps
    .map((step, i) => {
      const [a, b, c] = argsOf(step);
      return `  op[${i}] = ${OPS.indexOf(step.op)}; a1[${i}] = ${a}; a2[${i}] = ${b}; a3[${i}] = ${c};`;
    })
    .join('\n');
  const harness = `
#define ON_ISSUE(tok, reserve) skip
#define ON_LANDED(tok) skip
#define ON_COMPLETED(tok) skip
#define ON_RELEASED(tok, abandoned, neverStarted) skip
#define ON_FAILED(tok, abandoned, why) skip
#define ON_STARTED(tok) skip
#define ON_EXHAUSTED(maxAtt) skip
#define ON_STALE() skip
#define ON_ADMIN_RELEASED() skip
#define ON_LOST() skip
#include "${join(MODEL_DIR, 'scripts.pml')}"
byte op[${n}];
byte a1[${n}];
byte a2[${n}];
byte a3[${n}];
short i = 0;
byte result;
init {
${assignments}
  do
  :: i < ${n} ->
    if
    :: op[i] == 0 -> claim(a1[i], a2[i], a3[i])
    :: op[i] == 1 -> start(a1[i])
    :: op[i] == 2 -> extend(a1[i])
    :: op[i] == 3 -> if :: a2[i] != 0 -> result = a1[i] :: else -> result = 0 fi; complete(a1[i], result)
    :: op[i] == 4 -> release(a1[i], a2[i], a3[i])
    :: op[i] == 5 -> fail(a1[i], a2[i], 0)
    :: op[i] == 6 -> markDeadLettered(a1[i])
    :: op[i] == 7 -> adminRelease(a1[i], a2[i])
    :: op[i] == 8 -> adminPurge(a1[i])
    :: op[i] == 9 -> rec.live = false; setReply(OK, 0, 0, 0, false, NONE)
    :: op[i] == 10 -> loseRecord(); setReply(OK, 0, 0, 0, false, NONE)
    fi;
    printf("@reply %d %d %d %d %d %d\\n", rep.kind, rep.t, rep.a, rep.val, rep.flag, rep.s);
    printf("@record %d %d %d %d %d %d %d %d %d %d\\n", rec.s, rec.t, rec.a, rec.live, rec.v, rec.l, rec.d, rec.b, rec.r, rec.x);
    i++
  :: else -> break
  od
}
`;
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-consumer-replay-'));
  try {
    writeFileSync(join(dir, 'replay.pml'), harness);
    const out = execFileSync('spin', ['replay.pml'], { cwd: dir, encoding: 'utf8', maxBuffer: 1 << 26 });
    return out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l.startsWith('@reply') || l.startsWith('@record'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const kind = (name: string): number => KINDS.indexOf(name as (typeof KINDS)[number]);
const state = (s: RecordState | null | undefined): number => STATES.indexOf(s ?? undefined);

/** The error's number in scripts.pml (X_HANDLER, X_EXHAUSTED, ...). */
function errorCode(x: string | undefined): number {
  if (x === undefined) return 0;
  if (!x.startsWith('ATTEMPTS_EXHAUSTED')) return 1;
  if (x.endsWith('lost its lease')) return 3;
  return x.includes('recorded no outcome') ? 4 : 2;
}

function recordLine(rec: ModelRecord | undefined): string {
  if (!rec) return '@record 0 0 0 0 0 0 0 0 0 0';
  const r = rec.r === undefined ? 0 : Number(rec.r.slice(1));
  const bits = [rec.live, rec.v, rec.l, rec.d, rec.b].map(Number).join(' ');
  return `@record ${state(rec.s)} ${rec.t} ${rec.a} ${bits} ${r} ${errorCode(rec.x)}`;
}

/**
 * Runs the steps on record-model.ts: the lines scripts.pml would print, and the steps as run, a token -1
 * replaced by the latest one issued before it (so that most writes present a claim's token).
 */
export function replayInModel(steps: readonly ReplayStep[]): { lines: string[]; steps: ReplayStep[] } {
  const m = new RecordModel();
  const lines: string[] = [];
  const resolved: ReplayStep[] = [];
  const reply = (k: number, t = 0, a = 0, val = 0, flag = 0, s = 0) =>
    lines.push(`@reply ${k} ${t} ${a} ${val} ${flag} ${s}`);
  const write = (r: { ok: true } | { ok: false; currentFencingToken: number; state: RecordState | null }) =>
    r.ok ? reply(kind('OK')) : reply(kind('LEASE_LOST'), r.currentFencingToken, 0, 0, 0, state(r.state));
  for (const given of steps) {
    const step = 'token' in given && given.token < 0 ? { ...given, token: m.issued } : given;
    resolved.push(step);
    switch (step.op) {
      case 'claim': {
        const r = m.claim(FINGERPRINTS[step.fingerprint]!, step.maxAttempts, step.reserve);
        if (r.outcome === 'ACQUIRED' || r.outcome === 'ACQUIRED_STALE') {
          reply(kind(r.outcome), r.fencingToken, r.attempt, Number(r.started));
        } else if (r.outcome === 'DUPLICATE') {
          reply(
            kind(r.outcome),
            r.fencingToken,
            r.attempt,
            r.result === undefined ? 0 : Number(r.result.slice(1)),
          );
        } else if (r.outcome === 'FAILED') {
          reply(kind(r.outcome), r.fencingToken, r.attempt, errorCode(r.error), Number(r.deadLettered));
        } else if (r.outcome === 'PAYLOAD_MISMATCH') {
          reply(kind(r.outcome), r.fencingToken, r.attempt, 0, 0, state(r.state));
        } else reply(kind(r.outcome), r.fencingToken, r.attempt);
        break;
      }
      case 'start': {
        const r = m.start(step.token);
        if (r.ok) reply(kind('OK'), 0, r.attempt);
        else write(r);
        break;
      }
      case 'extend':
        write(m.extend(step.token));
        break;
      case 'mark-dead-lettered': {
        const r = m.markDeadLettered(step.token);
        if (r.ok) reply(kind('OK'), 0, 0, Number(r.first));
        else write(r);
        break;
      }
      case 'complete':
        write(m.complete(step.token, step.withResult ? `r${step.token}` : undefined));
        break;
      case 'release':
        write(m.release(step.token, step.abandoned, step.neverStarted));
        break;
      case 'fail':
        write(m.fail(step.token, 'E', step.abandoned));
        break;
      case 'admin-release': {
        const r = m.adminRelease(step.token, STATES[step.state]);
        if (r.outcome === 'OK') reply(kind('OK'), r.fencingToken, 0, 0, 0, state(r.previousState));
        else if (r.outcome === 'NOT_FOUND') reply(kind(r.outcome));
        else reply(kind(r.outcome), r.fencingToken, 0, 0, 0, state(r.state));
        break;
      }
      case 'admin-purge': {
        const r = m.adminPurge(PURGE_BITS.filter(([, bit]) => (step.states & bit) !== 0).map(([s]) => s));
        if (r.outcome === 'LEASE_HELD') reply(kind(r.outcome), r.fencingToken);
        else if (r.outcome === 'NOT_FOUND') reply(kind(r.outcome));
        else reply(kind(r.outcome), 0, 0, 0, 0, state(r.state));
        break;
      }
      case 'lapse':
        m.lapse();
        reply(kind('OK'));
        break;
      case 'lose':
        m.lose();
        reply(kind('OK'));
        break;
    }
    lines.push(recordLine(m.rec));
  }
  return { lines, steps: resolved };
}
