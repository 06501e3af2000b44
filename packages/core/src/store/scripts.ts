import { InvalidOptionError } from '../errors';
import {
  claimScript,
  completeScript,
  extendScript,
  failScript,
  giveBackScript,
  markDeadLetteredScript,
  releaseScript,
  startScript,
} from '../generated/scripts';
import { checkLeaseMs } from '../kit/option-checks';
import type { ClaimOptions } from './idempotency-store';
import type { RedisClient } from './redis-client';

/** Names of the scripts in `lua/`. */
export type ScriptName =
  | 'claim'
  | 'complete'
  | 'release'
  | 'fail'
  | 'extend'
  | 'start'
  | 'markDeadLettered'
  | 'giveBack';

const SCRIPTS = {
  claim: claimScript,
  complete: completeScript,
  release: releaseScript,
  fail: failScript,
  extend: extendScript,
  start: startScript,
  markDeadLettered: markDeadLetteredScript,
  giveBack: giveBackScript,
} as const;

/** Every script touches exactly one key, KEYS[1], the record, see docs/design.md#the-lua-contract. */
export const SCRIPT_NUMBER_OF_KEYS = 1;

const defined = new WeakMap<object, Record<ScriptName, string>>();

/** Whether a Redis error says the server's script cache lacks the script, after a restart or SCRIPT FLUSH. */
function isNoScript(error: unknown): boolean {
  return (
    typeof (error as Error | undefined)?.message === 'string' &&
    (error as Error).message.startsWith('NOSCRIPT')
  );
}

/** A command `defineScripts` registered on a client or a pipeline, taking the key and then ARGV. */
export type DefinedScript = (key: string, ...args: (string | number)[]) => Promise<unknown>;

/**
 * Runs one script on one key. On a standalone client it sends `EVALSHA` with the script's SHA-1, and on
 * `NOSCRIPT`, from a server that lost its script cache, `EVAL` with its text, which caches it again. These go
 * as plain ioredis commands rather than through the command `defineScripts` registered. ioredis's defined
 * commands build a second command object, a closure and a promise per call, which cost about 3 µs of CPU per
 * claim and complete. On a Cluster the defined command is used. ioredis before 5.11 auto-pipelines a
 * Cluster's commands by the slot of their first argument, which for `EVALSHA` is the SHA-1 and not the key,
 * see ioredis issue #2109. Concurrent calls on keys of different nodes would then share a pipeline and fail
 * together, and a defined command puts the key first. Either way the key goes through the client's own key
 * handling, its `keyPrefix` and a Cluster's slot.
 * @throws what the client throws, such as a `ReplyError` or a connection error. The caller maps it.
 */
export function evalScript(
  redis: RedisClient,
  name: ScriptName,
  key: string,
  args: readonly (string | number)[],
): Promise<unknown> {
  if (redis.isCluster) {
    const command = defineScripts(redis)[name];
    return (redis as unknown as Record<string, DefinedScript>)[command]!(key, ...args);
  }
  const script = SCRIPTS[name];
  return redis.evalsha(script.sha1, SCRIPT_NUMBER_OF_KEYS, key, ...args).catch((error: unknown) => {
    if (!isNoScript(error)) throw error;
    return redis.eval(script.lua, SCRIPT_NUMBER_OF_KEYS, key, ...args);
  });
}

/**
 * Registers the scripts on a client with `defineCommand`, once per client, under names that carry each
 * script's SHA-1, such as `idem_claim_03dd07e7`. Two versions of this package can then share one client, as
 * with BullMQ's versioned command names. Returns the command name of each script. ioredis sends a defined
 * script as `EVAL` with its text the first time on each connection, then as `EVALSHA`, and again as `EVAL`
 * after a `NOSCRIPT`. Pipelines of `claimMany`, and single calls on a Cluster, use them, see
 * {@link evalScript}.
 */
export function defineScripts(redis: RedisClient): Record<ScriptName, string> {
  const known = defined.get(redis);
  if (known) return known;
  const names = {} as Record<ScriptName, string>;
  for (const [name, script] of Object.entries(SCRIPTS) as [ScriptName, (typeof SCRIPTS)[ScriptName]][]) {
    const command = `idem_${name}_${script.sha1.slice(0, 8)}`;
    redis.defineCommand(command, { numberOfKeys: SCRIPT_NUMBER_OF_KEYS, lua: script.lua });
    names[name] = command;
  }
  defined.set(redis, names);
  return names;
}

function positiveInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidOptionError(`${name} must be a positive integer (milliseconds), got ${value}`);
  }
  return value;
}

/** A lease, a positive integer of at most 2^52 per `checkLeaseMs`, so its end on the clock is exact. */
function lease(value: number): number {
  return checkLeaseMs('leaseMs', positiveInt('leaseMs', value));
}

function token(value: number): number {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidOptionError(`fencingToken must be a positive integer, got ${value}`);
  }
  return value;
}

function fingerprintArg(value: string | undefined): string {
  if (value === undefined || value === '') return '';
  if (typeof value !== 'string' || !/^[0-9a-fA-F]{64}$/.test(value)) {
    throw new InvalidOptionError(
      `fingerprint must be 64 hex characters (SHA-256) or empty, got ${typeof value === 'string' ? `${value.length} characters` : typeof value}`,
    );
  }
  return value.toLowerCase();
}

/**
 * Builds each script's ARGV in the order its header block lists, checking ranges first, so a bad
 * argument is an `InvalidOptionError` here rather than a Lua error on the server.
 */
export const scriptArgs = {
  /** `nonce`: names the claim call (lua/claim.lua ARGV[7]; `PendingReleases` makes them); '' for none. */
  claim(o: ClaimOptions, nonce = ''): (string | number)[] {
    const maxAttempts = o.maxAttempts ?? 0;
    if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 0) {
      throw new InvalidOptionError(`maxAttempts must be an integer >= 0, got ${maxAttempts}`);
    }
    const fingerprint = fingerprintArg(o.fingerprint);
    return [
      lease(o.leaseMs),
      positiveInt('retentionMs', o.retentionMs),
      fingerprint,
      maxAttempts,
      o.reserve ? '1' : '0',
      // As the record stores it, see lua/includes/fingerprint.lua. Converting here costs less than in Lua.
      fingerprint === '' ? '' : Buffer.from(fingerprint, 'hex').toString('base64').replace(/=+$/, ''),
      nonce,
    ];
  },
  complete(fencingToken: number, retentionMs: number, result: string | undefined): (string | number)[] {
    return [
      token(fencingToken),
      positiveInt('retentionMs', retentionMs),
      result === undefined ? '0' : '1',
      result ?? '',
    ];
  },
  release(
    fencingToken: number,
    retentionMs: number,
    abandoned = false,
    neverStarted = false,
  ): (string | number)[] {
    return [
      token(fencingToken),
      positiveInt('retentionMs', retentionMs),
      abandoned === true ? '1' : '0',
      neverStarted === true ? '1' : '0',
    ];
  },
  fail(fencingToken: number, retentionMs: number, error: string, abandoned = false): (string | number)[] {
    return [
      token(fencingToken),
      positiveInt('retentionMs', retentionMs),
      String(error),
      abandoned === true ? '1' : '0',
    ];
  },
  extend(fencingToken: number, leaseMs: number, retentionMs: number): (string | number)[] {
    return [token(fencingToken), lease(leaseMs), positiveInt('retentionMs', retentionMs)];
  },
  start(fencingToken: number, leaseMs: number, retentionMs: number): (string | number)[] {
    return [token(fencingToken), lease(leaseMs), positiveInt('retentionMs', retentionMs)];
  },
  markDeadLettered(fencingToken: number): (string | number)[] {
    return [token(fencingToken)];
  },
  giveBack(nonce: string, retentionMs: number): (string | number)[] {
    return [nonce, positiveInt('retentionMs', retentionMs)];
  },
};
