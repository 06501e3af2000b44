import type { RedisIdempotencyAdmin } from '@idempotent-consumer/core';
import type { CliIo } from '../io';
import type { Output } from '../output';

/** What every command gets: the admin on the connected Redis, the output, and the global flags. */
export interface CommandContext {
  readonly admin: RedisIdempotencyAdmin;
  readonly out: Output;
  readonly io: CliIo;
  /** `--yes`: do not ask for confirmation. */
  readonly yes: boolean;
}
