import type { Idempotency } from '../runner/idempotency';
import { attachLogger, consoleLogger, type IdempotencyLogger } from '../runner/logger';

const PREFIX = 'idempotent-consumer:';

/**
 * The log of one broker consumer (a RabbitMQ queue, a Kafka wrapper, an SQS queue): warnings a person
 * must not miss, never a line per successful message. Every line starts with `idempotent-consumer:` and
 * names the consumer (`where`); a logger that throws changes nothing.
 *
 * Built by {@link AdapterLog.for}, which also makes sure the runner's own warnings (lease lost, result
 * omitted, store unavailable and recovered, from `attachLogger`) reach this logger once: when the runner
 * logs to another logger (or none), this logger is attached to the runner too, until {@link AdapterLog.close}.
 */
export class AdapterLog {
  readonly #logger: IdempotencyLogger | false;
  readonly #fields: Record<string, unknown>;
  readonly #detach: () => void;
  readonly #once = new Set<string>();

  private constructor(
    logger: IdempotencyLogger | false,
    readonly where: string,
    fields: Record<string, unknown>,
    detach: () => void,
  ) {
    this.#logger = logger;
    this.#fields = fields;
    this.#detach = detach;
  }

  /**
   * The log of a consumer.
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
    const chosen = logger ?? consoleLogger;
    const detach =
      chosen && chosen !== runner.logger ? attachLogger(runner as Idempotency, chosen) : () => {};
    return new AdapterLog(chosen, where, fields, detach);
  }

  /** A log that writes nothing (for parts built without a consumer, such as unit-tested pieces). */
  static readonly silent: AdapterLog = new AdapterLog(false, '', {}, () => {});

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

  /** Detaches the logger from the runner when {@link AdapterLog.for} attached it. */
  close(): void {
    this.#detach();
  }

  #write(level: 'warn' | 'error' | 'info', message: string, fields: Record<string, unknown>): void {
    const logger = this.#logger;
    if (!logger) return;
    try {
      const line = `${PREFIX} ${message}`;
      const all = { ...this.#fields, ...fields };
      if (level === 'info' && !logger.info) logger.warn(line, all);
      else (logger[level] as NonNullable<IdempotencyLogger['info']>).call(logger, line, all);
    } catch {
      // A logger that throws changes nothing.
    }
  }
}
