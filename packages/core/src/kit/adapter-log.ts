import type { Idempotency } from '../runner/idempotency';
import { attachLogger, consoleLogger, type IdempotencyLogger } from '../runner/logger';

const PREFIX = 'idempotent-consumer:';

/** One attachment of a logger to a runner, shared by every consumer that logs there. */
interface Attachment {
  count: number;
  readonly detach: () => void;
}

/** The runner-logger attachments, per runner then logger: one `attachLogger` per pair. */
const attachments = new WeakMap<object, Map<IdempotencyLogger, Attachment>>();

/** Attaches `logger` to `runner` once per pair, counting users; the returned function releases one use. */
function attachShared(runner: Idempotency, logger: IdempotencyLogger): () => void {
  let byLogger = attachments.get(runner);
  if (!byLogger) {
    byLogger = new Map();
    attachments.set(runner, byLogger);
  }
  let attachment = byLogger.get(logger);
  if (!attachment) {
    attachment = { count: 0, detach: attachLogger(runner, logger) };
    byLogger.set(logger, attachment);
  }
  attachment.count++;
  const shared = attachment;
  const owners = byLogger;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    shared.count--;
    if (shared.count > 0) return;
    shared.detach();
    owners.delete(logger);
  };
}

/**
 * The log of one broker consumer (a RabbitMQ queue, a Kafka wrapper, an SQS queue): warnings a person
 * must not miss, never a line per successful message. Every line starts with `idempotent-consumer:` and
 * names the consumer (`where`); a logger that throws changes nothing.
 *
 * **The runner's warnings.** While the consumer runs ({@link AdapterLog.open} at its start, or when it is
 * built if it has no start, to {@link AdapterLog.close} at its stop or close), the runner's own warnings
 * (lease lost, result omitted, store unavailable and recovered, from `attachLogger`) reach this logger
 * once: when the runner logs to another logger (or none), this logger is attached to the runner, once per
 * (runner, logger) pair however many consumers share them, and detached when the last of them closes.
 *
 * **One warning per store outage.** The runner owns the outage lines: one `warn` when a call first finds
 * the store unavailable, one `info` (else `warn`) when it answers a claim again, with the outage's length.
 * The kit's other parts do not repeat them: `StoreGate` pauses and resumes consumption silently (the
 * adapters' `storeUnavailable` / `storeRecovered` events say so), and `watchRedisErrors` logs the Redis
 * client's first error of an outage (with where Redis is) only at `debug`, through the first consumer
 * whose logger has `debug`.
 */
export class AdapterLog {
  readonly #logger: IdempotencyLogger | false;
  readonly #fields: Record<string, unknown>;
  readonly #runner: Pick<Idempotency, 'logger' | 'on' | 'off'> | undefined;
  readonly #once = new Set<string>();
  #release: (() => void) | undefined;

  private constructor(
    logger: IdempotencyLogger | false,
    readonly where: string,
    fields: Record<string, unknown>,
    runner: Pick<Idempotency, 'logger' | 'on' | 'off'> | undefined,
  ) {
    this.#logger = logger;
    this.#fields = fields;
    this.#runner = runner;
  }

  /**
   * The log of a consumer. It writes the consumer's lines at once; the runner's warnings reach it from
   * {@link AdapterLog.open} on.
   * @param runner - the consumer's runner: its `logger` says whether its warnings already reach `logger`.
   * @param logger - the consumer's `logger` option: `undefined` for the default (console), `false` for none.
   * @param where - names the consumer in every line, e.g. `the consumer of queue orders`.
   * @param fields - structured fields of every line (e.g. `{ queue: 'orders' }`).
   */
  static for(
    runner: Pick<Idempotency, 'logger' | 'on' | 'off'>,
    logger: IdempotencyLogger | false | undefined,
    where: string,
    fields: Record<string, unknown> = {},
  ): AdapterLog {
    return new AdapterLog(logger ?? consoleLogger, where, fields, runner);
  }

  /** A log that writes nothing (for parts built without a consumer, such as unit-tested pieces). */
  static readonly silent: AdapterLog = new AdapterLog(false, '', {}, undefined);

  /** The logger lines go to, `false` for none. */
  get logger(): IdempotencyLogger | false {
    return this.#logger;
  }

  /** Logs a warning: `idempotent-consumer: <message>`. */
  warn(message: string, fields: Record<string, unknown> = {}): void {
    this.#write('warn', message, fields);
  }

  /** Logs an error (something is misconfigured or broken). */
  error(message: string, fields: Record<string, unknown> = {}): void {
    this.#write('error', message, fields);
  }

  /** Logs at `info` (else `warn` when the logger has no `info`): good news after a warning. */
  info(message: string, fields: Record<string, unknown> = {}): void {
    this.#write('info', message, fields);
  }

  /** Logs at `debug` when the logger has `debug`, else nothing: detail behind a warning logged elsewhere. */
  debug(message: string, fields: Record<string, unknown> = {}): void {
    if (this.#logger && typeof this.#logger.debug === 'function') this.#write('debug', message, fields);
  }

  /**
   * {@link AdapterLog.warn}, only the first time `topic` is given (until {@link AdapterLog.again} with it):
   * for what repeats per message, such as messages without a key.
   * @returns whether it logged.
   */
  warnOnce(topic: string, message: string, fields: Record<string, unknown> = {}): boolean {
    if (this.#once.has(topic)) return false;
    this.#once.add(topic);
    this.warn(message, fields);
    return true;
  }

  /** Lets {@link AdapterLog.warnOnce} log `topic` again (the condition ended, e.g. a connection is back). */
  again(topic: string): void {
    this.#once.delete(topic);
  }

  /**
   * Lets the runner's warnings reach this logger (see the class comment): attaches it to the runner unless
   * the runner already logs there, or it is `false`, or this log is already open. Call it when the consumer
   * starts; {@link AdapterLog.close} undoes it.
   */
  open(): void {
    const runner = this.#runner;
    const logger = this.#logger;
    if (this.#release || !runner || !logger || logger === runner.logger) return;
    this.#release = attachShared(runner as Idempotency, logger);
  }

  /** Undoes {@link AdapterLog.open} (call it when the consumer stops or closes); safe to call again. */
  close(): void {
    this.#release?.();
    this.#release = undefined;
  }

  #write(level: 'warn' | 'error' | 'info' | 'debug', message: string, fields: Record<string, unknown>): void {
    const logger = this.#logger;
    if (!logger) return;
    try {
      const line = `${PREFIX} ${message}`;
      const all = { ...this.#fields, ...fields };
      if (level === 'info' && !logger.info) logger.warn(line, all);
      else if (level === 'debug') logger.debug?.(line, all);
      else (logger[level] as NonNullable<IdempotencyLogger['info']>).call(logger, line, all);
    } catch {
      // A logger that throws changes nothing.
    }
  }
}
