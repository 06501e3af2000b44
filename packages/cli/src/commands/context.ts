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
  /**
   * Called by a command once it changed records (a release, a purge that deleted any): a report of it that
   * stdout then cuts exits `EXIT.outputCut`, saying the change stands; one that changed nothing keeps its
   * own status.
   */
  changed(): void;
}
