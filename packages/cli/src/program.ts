import { isIdempotencyError, type RecordState, RedisIdempotencyAdmin } from '@idempotent-consumer/core';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import type { CommandContext } from './commands/context';
import { inspect } from './commands/inspect';
import { list } from './commands/list';
import { purge } from './commands/purge';
import { release } from './commands/release';
import { stats } from './commands/stats';
import { NotConfirmedError } from './confirm';
import { connect, NotStandaloneError } from './connect';
import { type CliIo, EXIT } from './io';
import { output, printable } from './output';
import { type TrackedStream, trackWrites, type WritesOutcome } from './tracked-stream';
import { cliVersion } from './version';

const STATES: readonly RecordState[] = ['IN_PROGRESS', 'COMPLETED', 'RELEASED', 'FAILED'];

/**
 * The admin's `maxKeyBytes`, no limit. A store may allow longer keys than the default 512 bytes, and the CLI
 * must read, list and purge every record a store wrote, where one longer key would fail the whole scope. It
 * also looks up whatever key the operator types; a longer one is then simply not found.
 */
const ANY_KEY_LENGTH = Number.MAX_SAFE_INTEGER;

interface GlobalOptions {
  url?: string;
  cluster?: boolean;
  prefix: string;
  json: boolean;
  yes: boolean;
  commandTimeoutMs: number;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('a positive integer is expected');
  return n;
}

function stateList(value: string, previous: RecordState[] = []): RecordState[] {
  const states = value.split(',').map((s) => s.trim().toUpperCase());
  for (const s of states) {
    if (!STATES.includes(s as RecordState)) {
      throw new InvalidArgumentError(`unknown state ${JSON.stringify(s)}; one of ${STATES.join(', ')}`);
    }
  }
  return [...previous, ...(states as RecordState[])];
}

/**
 * Runs the `idempotent-consumer` command with `args`, the arguments after the program name. It resolves with
 * the exit status, see {@link EXIT}, once its output was handed to `io.stdout`, which the caller reads
 * meanwhile. It never calls `process.exit`. A stdout or stderr whose reader went away with EPIPE never ends
 * the process; {@link EXIT}'s `outputCut` gives the status then.
 */
export async function runCli(args: readonly string[], io: CliIo): Promise<number> {
  let status: number = EXIT.ok;
  const stdout = trackWrites(io.stdout);
  const stderr = trackWrites(io.stderr);
  /** The command run, once it changed records, so that a lost report does not go unnoticed. */
  let change: 'release' | 'purge' | undefined;
  const program = new Command('idempotent-consumer')
    .description(
      'Inspect and repair the idempotency records of idempotent-consumer in Redis (standalone or Cluster).',
    )
    // commander's own `-V, --version` prints it on stdout and exits 0, see failureStatus.
    .version(cliVersion(), '-V, --version', 'print the version of idempotent-consumer and exit')
    .option(
      '-u, --url <url>',
      'Redis URL (redis:// or rediss://), any node of a Cluster (default: $REDIS_URL, else redis://127.0.0.1:6379)',
    )
    .option('--cluster', 'the URL is a Redis Cluster node (default: ask the server with INFO cluster)')
    .option('--no-cluster', 'the URL is a standalone Redis (refused, exit 2, when it is a Cluster node)')
    .option('-p, --prefix <prefix>', "the stores' keyPrefix", 'idem')
    .option('--json', 'print JSON for scripts instead of tables', false)
    .option('-y, --yes', 'do not ask for confirmation before a change', false)
    .option(
      '--command-timeout-ms <ms>',
      'how long one Redis command may take, in milliseconds',
      positiveInt,
      5000,
    )
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({
      writeOut: (text) => stdout.write(text),
      writeErr: (text) => stderr.write(text),
    });

  /**
   * Wraps a command. It connects, runs the command, maps failures to an exit status and disconnects.
   * `changes` names a command that may change records; it calls `ctx.changed()` once it did.
   */
  const action =
    <A extends unknown[]>(
      body: (ctx: CommandContext, ...args: A) => Promise<number>,
      changes?: 'release' | 'purge',
    ) =>
    async (...args: A) => {
      const changed = () => {
        change = changes;
      };
      const options = program.opts<GlobalOptions>();
      const url = options.url ?? io.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
      const out = output({ stdout, stderr }, options.json);
      const redis = await connect({
        url,
        cluster: options.cluster,
        commandTimeoutMs: options.commandTimeoutMs,
      });
      try {
        const admin = new RedisIdempotencyAdmin(
          { redis },
          { keyPrefix: options.prefix, maxKeyBytes: ANY_KEY_LENGTH },
        );
        status = await body({ admin, out, io, yes: options.yes, changed }, ...args);
      } finally {
        // A client whose connection already ended would wait up to 2 s in disconnect(), see connect.ts.
        if (redis.status !== 'end') redis.disconnect();
      }
    };

  program
    .command('inspect')
    .description(
      'show one record: state, fencing token, attempt, lease left on the server clock, times, result and error',
    )
    .argument('<scope>', 'the scope (consumer group + topic, queue, stream/consumer, HTTP route...)')
    .argument('<key>', 'the idempotency key')
    .option('--preview-chars <n>', 'longest result / error preview', positiveInt, 200)
    .action(
      action((ctx, scope: string, key: string, o: { previewChars: number }) => inspect(ctx, scope, key, o)),
    );

  program
    .command('list')
    .description('list the records of a scope (SCAN, never KEYS)')
    .argument('<scope>', 'the scope')
    .option(
      '-s, --state <states>',
      `only these states, comma-separated (${STATES.join(', ')})`,
      stateList,
      [],
    )
    .option('--limit <n>', 'at most this many records', positiveInt, 100)
    .option('--preview-chars <n>', 'longest result / error preview (--json)', positiveInt, 200)
    .action(
      action((ctx, scope: string, o: { state: RecordState[]; limit: number; previewChars: number }) =>
        list(ctx, scope, { states: o.state, limit: o.limit, previewChars: o.previewChars }),
      ),
    );

  program
    .command('stats')
    .description('count the records of a scope per state (SCAN, never KEYS)')
    .argument('<scope>', 'the scope')
    .action(action((ctx, scope: string) => stats(ctx, scope)));

  program
    .command('release')
    .description('make a stuck IN_PROGRESS or a FAILED record claimable again (asks first unless --yes)')
    .argument('<scope>', 'the scope')
    .argument('<key>', 'the idempotency key')
    .option(
      '--retention-ms <ms>',
      'how long the released record is kept, in milliseconds',
      positiveInt,
      86_400_000,
    )
    .option('--preview-chars <n>', 'longest result / error preview', positiveInt, 200)
    .action(
      action(
        (ctx, scope: string, key: string, o: { retentionMs: number; previewChars: number }) =>
          release(ctx, scope, key, o),
        'release',
      ),
    );

  program
    .command('purge')
    .description(
      'delete the records of a scope, except those whose lease a worker holds (asks first unless --yes)',
    )
    .argument('<scope>', 'the scope')
    .option(
      '-s, --state <states>',
      `only these states, comma-separated (${STATES.join(', ')})`,
      stateList,
      [],
    )
    .action(
      action(
        (ctx, scope: string, o: { state: RecordState[] }) => purge(ctx, scope, { states: o.state }),
        'purge',
      ),
    );

  try {
    await program.parseAsync(args, { from: 'user' });
  } catch (error) {
    status = failureStatus(error, stderr);
  }
  status = statusAfterOutput(status, await stdout.settled(), change, stderr);
  await stderr.settled();
  return status;
}

/** The exit status of a command that threw `error`, which is told on `stderr` when it is not usage. */
function failureStatus(error: unknown, stderr: TrackedStream): number {
  if (error instanceof CommanderError) {
    return error.exitCode === 0 ? EXIT.ok : EXIT.usage; // help and version exit 0
  }
  if (error instanceof NotConfirmedError) {
    stderr.write(`${error.message}\n`); // its question was made printable by confirm
    return EXIT.usage;
  }
  if (error instanceof NotStandaloneError) {
    stderr.write(`idempotent-consumer: ${error.message}\n`);
    return EXIT.usage;
  }
  const code = isIdempotencyError(error) ? ` [${error.code}]` : '';
  const message = printable(error instanceof Error ? error.message : String(error));
  stderr.write(`idempotent-consumer: ${message}${code}\n`);
  // A scope, key or prefix the core refuses, such as an empty one, is the operator's input, not Redis.
  const badInput =
    isIdempotencyError(error) &&
    (error.code === 'INVALID_IDEMPOTENCY_KEY' || error.code === 'INVALID_OPTION');
  return badInput ? EXIT.usage : EXIT.error;
}

/**
 * The exit status once stdout's writes ended as `written` says. A reader that went away, as `| head -1` does,
 * is no failure of a read-only command, which stops quietly with its status. A `change` whose report was cut
 * says so on stderr and exits `outputCut`, since its changes are done and stay done, unless Redis failed and
 * that was already told. A write that failed in another way is told the same way.
 */
function statusAfterOutput(
  status: number,
  written: WritesOutcome,
  change: 'release' | 'purge' | undefined,
  stderr: TrackedStream,
): number {
  if (written.kind === 'written' || (written.kind === 'cut' && change === undefined)) return status;
  if (written.kind === 'cut') {
    stderr.write(
      `idempotent-consumer: stdout closed before the ${change} report was written; what it changed stays changed (see inspect, stats)\n`,
    );
  } else {
    const reason = written.error instanceof Error ? written.error.message : String(written.error);
    stderr.write(`idempotent-consumer: the output could not be written: ${reason}\n`);
  }
  return status === EXIT.error ? status : EXIT.outputCut;
}
