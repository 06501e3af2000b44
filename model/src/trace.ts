/**
 * Turns the trace lines record.pml prints (`@<event> <numbers>`, replayed by `pan -r`) into readable steps.
 * Tokens are printed by the order they were issued in: the model renumbers the tokens it still refers to
 * after every step (`@renumber`), and this undoes it.
 */

/** States and reply kinds, by the numbers of model/scripts.pml. */
export const KINDS = [
  'NONE',
  'IN_PROGRESS',
  'COMPLETED',
  'RELEASED',
  'FAILED',
  'ACQUIRED',
  'ACQUIRED_STALE',
  'DUPLICATE',
  'CONFLICT',
  'PAYLOAD_MISMATCH',
  'OK',
  'LEASE_LOST',
  'NOT_FOUND',
  'NOT_RELEASABLE',
  'TOKEN_CHANGED',
  'DELETED',
  'LEASE_HELD',
  'OTHER_STATE',
] as const;

/** The properties of record.pml, by number, in its words. */
export const PROPERTIES: Readonly<Record<number, string>> = {
  1: 'P1 at most one worker whose writes can land at a time',
  2: 'P2 at most one handler runs per key at a time, within its lease',
  3: 'P3 a stalled worker cannot overwrite a newer one (every write that lands carries the newest token)',
  4: 'P4 tokens strictly increase for a key, also across the loss of its record',
  5: "P5 a COMPLETED record's result comes from a handler that ran, under the claim the record carries",
  6: 'P6 a key turns FAILED only after maxAttempts handlers (may have) started, or a non-retryable failure',
  7: 'P7 a completed key never runs again while the record lives',
  8: 'P8 every ACQUIRED_STALE follows a handler that may have run and recorded no outcome',
};

const ERRORS = [
  '',
  'the holder’s error',
  'ATTEMPTS_EXHAUSTED',
  'ATTEMPTS_EXHAUSTED, lapsed',
  'ATTEMPTS_EXHAUSTED, abandoned',
];
const ENDS = [
  '',
  'returns',
  'returns (no result stored)',
  'throws',
  'times out (handlerTimeoutMs)',
  'throws a non-retryable error',
];
const PURGE_STATES: Readonly<Record<number, string>> = { 0: 'any state', 10: 'COMPLETED or FAILED' };

/** The readable steps of a trace; the lines that are not trace lines are dropped. */
export function formatTrace(lines: readonly string[]): string[] {
  // Canonical token number -> the order it was issued in.
  let names = new Map<number, number>();
  let issued = 0;
  const t = (token: number): string => {
    if (token === 0) return '-';
    let name = names.get(token);
    if (name === undefined) {
      issued += 1;
      name = issued;
      names.set(token, name);
    }
    return `t${name}`;
  };
  const command = (op: number, token: number, arg: number): string => {
    switch (op) {
      case 1:
        return 'claim';
      case 2:
        return 'claim (reserve)';
      case 3:
        return `start ${t(token)}`;
      case 4:
        return `extend ${t(token)}`;
      case 5:
        return `complete ${t(token)}${arg ? ' with its result' : ' without a result'}`;
      case 6:
        return `release ${t(token)}${arg & 1 ? ' abandoned' : ''}${arg & 2 ? ' neverStarted' : ''}`;
      case 7:
        return `fail ${t(token)}${arg & 1 ? ' abandoned' : ''}${arg >> 2 === 1 ? ' (non-retryable)' : ' (last attempt)'}`;
      default:
        return `mark-dead-lettered ${t(token)}`;
    }
  };
  const steps: string[] = [];
  // A step's renumbering (old -> new), applied before the next event: tokens below the first one renumbered
  // keep their number, the others that are not renumbered are forgotten (lastIssued is never forgotten,
  // so a forgotten token always has a renumbered one above it).
  let renumbering: [number, number][] = [];
  for (const line of lines) {
    const match = /^@([a-z-]+)((?: -?\d+)*)\s*$/.exec(line.trim());
    if (!match) continue;
    const [event, rest] = [match[1]!, match[2]!];
    const n = rest.trim() === '' ? [] : rest.trim().split(/\s+/).map(Number);
    if (event !== 'renumber' && renumbering.length > 0) {
      const first = Math.min(...renumbering.map(([old]) => old));
      const next = new Map([...names].filter(([token]) => token < first));
      for (const [old, renamed] of renumbering) next.set(renamed, names.get(old) ?? 0);
      names = next;
      renumbering = [];
    }
    switch (event) {
      case 'send':
        steps.push(`w${n[0]}: ${command(n[1]!, n[2]!, n[3]!)}`);
        break;
      case 'late':
        steps.push(`env: w${n[0]}'s ${command(n[1]!, n[2]!, n[3]!)} is applied late`);
        break;
      case 'never':
        steps.push(`env: w${n[0]}'s ${command(n[1]!, n[2]!, n[3]!)} is never applied`);
        break;
      case 'reply': {
        const [kind, token, attempt, val, flag, state] = n as [
          number,
          number,
          number,
          number,
          number,
          number,
        ];
        const name = KINDS[kind] ?? String(kind);
        let detail = '';
        if (kind === 5 || kind === 6) detail = ` ${t(token)} attempt ${attempt}${val ? '' : ' (reserved)'}`;
        else if (kind === 7) detail = ` ${t(token)} ${val ? `result of ${t(val)}` : 'no result'}`;
        else if (kind === 8) detail = ` held by ${t(token)}`;
        else if (kind === 4) detail = ` ${t(token)} (${ERRORS[val] ?? val}${flag ? ', dead-lettered' : ''})`;
        else if (kind === 11) detail = ` (record: ${KINDS[state]} ${t(token)})`;
        else if (kind === 10 && attempt > 0) detail = ` attempt ${attempt}`;
        else if (kind >= 12) detail = state ? ` (${KINDS[state]})` : '';
        steps[steps.length - 1] += ` -> ${name}${detail}`;
        break;
      }
      case 'record': {
        const [s, token, a, live, v, l, d, b, r] = n as number[];
        const flags = [v && 'v', l && 'l', d && 'd', b && 'b'].filter(Boolean).join('');
        steps[steps.length - 1] += s
          ? `   [record ${KINDS[s!]} ${t(token!)} a=${a}${live ? ' lease live' : ''}${flags ? ` ${flags}` : ''}${r ? ` result of ${t(r)}` : ''}]`
          : '   [no record]';
        break;
      }
      case 'lost':
        steps[steps.length - 1] += ' (its reply is lost)';
        break;
      case 'gaveup':
        steps[steps.length - 1] += ' (unanswered: the caller gives up before it is applied)';
        break;
      case 'starts':
        steps.push(`w${n[0]}: the handler starts (${t(n[1]!)})`);
        break;
      case 'ends':
        steps.push(`w${n[0]}: the handler ${ENDS[n[1]!] ?? n[1]}`);
        break;
      case 'crash':
        steps.push(`w${n[0]}: crashes`);
        break;
      case 'lapse':
        steps.push(`env: the server clock passes the lease of ${t(n[0]!)}`);
        break;
      case 'loss':
        steps.push('env: the record is lost (DEL, expiry, a restart without persistence)');
        break;
      case 'admin-release':
        steps.push(
          n[0]
            ? `operator: admin-release expecting ${t(n[0])} ${KINDS[n[1]!]}`
            : 'operator: admin-release (any)',
        );
        break;
      case 'purge':
        steps.push(`operator: admin-purge (${PURGE_STATES[n[0]!] ?? n[0]})`);
        break;
      case 'renumber':
        renumbering.push([n[0]!, n[1]!]);
        break;
      case 'violated':
        steps.push(`VIOLATED ${PROPERTIES[n[0]!] ?? n[0]}`);
        break;
    }
  }
  return steps;
}
