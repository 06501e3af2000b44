import { createHash } from 'node:crypto';
import { WriteCoalescer } from '@idempotent-consumer/core/tools';
import type Redis from 'ioredis';
import { BUSY, type Contender, LEASE_MS, RETENTION_MS } from './contender';
import { luaSource } from './lua-source';

/** A script of `lua/` with its SHA-1, loaded once into the server's script cache. */
export interface LoadedScript {
  readonly sha1: string;
  readonly lua: string;
}

/**
 * Reads `lua/<name>.lua` (includes expanded) and loads it (`SCRIPT LOAD`), so EVALSHA finds it. The text
 * is byte for byte what the core embeds, so both send the same script (the same SHA-1).
 */
export async function loadScript(redis: Redis, name: string): Promise<LoadedScript> {
  const lua = luaSource(name);
  const sha1 = createHash('sha1').update(lua).digest('hex');
  const loaded = (await redis.script('LOAD', lua)) as string;
  if (loaded !== sha1) throw new Error(`SCRIPT LOAD returned ${loaded} for ${name}.lua, expected ${sha1}`);
  return { sha1, lua };
}

/**
 * The floor any Redis+Lua idempotency layer can reach with these scripts: a bare ioredis client that sends
 * `lua/claim.lua` and, after the handler, `lua/complete.lua` with EVALSHA, decoding the replies inline. No
 * library code: no key validation, no timeouts, no heartbeat, no events, no result codec beyond JSON.
 * `maxCommandsPerWrite` above 1 coalesces its writes as `RedisIdempotencyStore` does (`WriteCoalescer`), for
 * the reference row that separates what coalescing gains from what the library costs.
 */
export async function bareScripts(
  redis: Redis,
  prefix: string,
  scope = 'bench',
  maxCommandsPerWrite = 1,
): Promise<BareScripts> {
  const [claim, complete] = await Promise.all([loadScript(redis, 'claim'), loadScript(redis, 'complete')]);
  const writes = maxCommandsPerWrite > 1 ? new WriteCoalescer(maxCommandsPerWrite) : undefined;
  return new BareScripts(redis, `${prefix}:${Buffer.byteLength(scope)}:${scope}:`, claim, complete, writes);
}

/** See {@link bareScripts}. */
export class BareScripts implements Contender {
  readonly name = 'bare ioredis: EVALSHA claim + complete';

  constructor(
    private readonly redis: Redis,
    private readonly keyPrefix: string,
    private readonly claimScript: LoadedScript,
    private readonly completeScript: LoadedScript,
    private readonly writes?: WriteCoalescer,
  ) {}

  /**
   * EVALSHA; on NOSCRIPT (someone ran SCRIPT FLUSH on the shared server) loads the script again and
   * retries once, as every client does. Not on the hot path: the first try normally succeeds.
   */
  #evalsha(script: LoadedScript, key: string, ...args: (string | number)[]): Promise<unknown> {
    const send = () => this.redis.evalsha(script.sha1, 1, key, ...args);
    const sent = this.writes ? this.writes.send(this.redis.stream, send) : send();
    return sent.catch(async (error: Error) => {
      if (!error.message.startsWith('NOSCRIPT')) throw error;
      await this.redis.script('LOAD', script.lua);
      return this.redis.evalsha(script.sha1, 1, key, ...args);
    });
  }

  /**
   * One claim alone (the duplicate path's floor): the raw reply. Its ARGV is what the store sends
   * (lua/claim.lua's header: leaseMs, retentionMs, fingerprint, maxAttempts, reserve, fingerprint in
   * base64), so both make the server do the same work: without a fingerprint, or with the SHA-256 of
   * `payload`'s bytes when one is given (as the adapters fingerprint a message's body by default).
   */
  claim(key: string, payload?: Uint8Array | string): Promise<unknown[]> {
    let hex = '';
    let base64 = '';
    if (payload !== undefined) {
      const digest = createHash('sha256').update(payload).digest();
      hex = digest.toString('hex');
      base64 = digest.toString('base64').replace(/=+$/, '');
    }
    return this.#evalsha(
      this.claimScript,
      this.keyPrefix + key,
      LEASE_MS,
      RETENTION_MS,
      hex,
      0,
      '0',
      base64,
    ) as Promise<unknown[]>;
  }

  /**
   * Claims `key` (fingerprinting `payload` when given), runs `handler` on ACQUIRED, then completes with its
   * result. Resolves the result, a DUPLICATE's stored result, or {@link BUSY} for any other outcome.
   */
  async process(
    key: string,
    handler: () => Promise<unknown>,
    payload?: Uint8Array | string,
  ): Promise<unknown> {
    const reply = await this.claim(key, payload);
    const outcome = reply[0];
    if (outcome === 'DUPLICATE')
      return reply[3] === 1 ? JSON.parse((reply[4] as string).slice(1)) : undefined;
    if (outcome !== 'ACQUIRED' && outcome !== 'ACQUIRED_STALE') return BUSY;
    const result = await handler();
    await this.complete(key, reply[1] as number, result);
    return result;
  }

  /**
   * The completion of a claim that `claim` ACQUIRED with `fencingToken`: `result` stored as JSON, none when
   * it is `undefined` (as the runner stores none for a handler that returns nothing), with the ARGV the
   * store sends (lua/complete.lua's header). Rejects only when the server does.
   */
  complete(key: string, fencingToken: number, result: unknown): Promise<unknown> {
    const stored = result === undefined ? ['0', ''] : ['1', `j${JSON.stringify(result)}`];
    return this.#evalsha(this.completeScript, this.keyPrefix + key, fencingToken, RETENTION_MS, ...stored);
  }

  async close(): Promise<void> {}
}
