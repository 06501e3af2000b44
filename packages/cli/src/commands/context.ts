import type { RedisIdempotencyAdmin } from '@idempotent-consumer/core';
import type { CliIo } from '../io';
import type { Output } from '../output';

/** What every command gets. The admin on the connected Redis, the output, and the global flags. */
export interface CommandContext {
  readonly admin: RedisIdempotencyAdmin;
  readonly out: Output;
  readonly io: CliIo;
  /** `--yes`, do not ask for confirmation. */
  readonly yes: boolean;
  /**
   * Called by a command once it changed records, by a release or a purge that deleted any. If stdout then
   * cuts its report, the CLI exits `EXIT.outputCut` and says the change stands. A command that changed
   * nothing keeps its own status.
   */
  changed(): void;
}
