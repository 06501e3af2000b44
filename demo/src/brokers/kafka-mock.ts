import { type ChildProcess, execFileSync, spawn } from 'node:child_process';

/** A Kafka wire-protocol broker started from kcat (librdkafka's mock cluster). */
export interface KafkaMockCluster {
  /** `host:port` of each mock broker, for KafkaJS `brokers`. */
  readonly brokers: string[];
  /** The id of the process group the cluster runs in (the `sleep` feeding kcat, and kcat itself). */
  readonly processGroup: number;
  /** Stops the whole process group (the `sleep` feeding kcat and kcat itself). */
  stop(): Promise<void>;
}

/** Whether the `kcat` program is installed (`apt-get install -y kcat`). */
export function hasKcat(): boolean {
  try {
    execFileSync('kcat', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const BOOTSTRAP = /(?:bootstrap\.servers=|replaced with )((?:[\d.]+:\d+,?)+)/;

/**
 * Starts librdkafka's mock cluster through kcat (integration-tests/README.md, "How a suite finds its service"):
 * `sleep infinity | kcat -P -b unused:9 -t boot -X test.mock.num.brokers=N`, in its own process group,
 * and reads the brokers' addresses from the line librdkafka logs on stderr. The mock creates topics on
 * first use (4 partitions each); `admin.createTopics` fails against it.
 *
 * @throws Error when kcat is missing, exits, or prints no address within `timeoutMs`.
 */
export async function startKafkaMockCluster(
  options: { brokers?: number; timeoutMs?: number } = {},
): Promise<KafkaMockCluster> {
  const count = options.brokers ?? 3;
  const child: ChildProcess = spawn(
    'sh',
    ['-c', `exec sleep infinity | exec kcat -P -b unused:9 -t boot -X test.mock.num.brokers=${count}`],
    { detached: true, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    await exited;
  };
  try {
    const brokers = await new Promise<string[]>((resolve, reject) => {
      let text = '';
      const timer = setTimeout(
        () =>
          reject(new Error(`kcat printed no mock cluster address within ${options.timeoutMs ?? 10_000} ms`)),
        options.timeoutMs ?? 10_000,
      );
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(
          new Error(`kcat exited (code ${code}) before its mock cluster started: ${text.slice(0, 500)}`),
        );
      });
      child.stderr!.on('data', (chunk: Buffer) => {
        if (text.length < 65_536) text += chunk.toString();
        const match = BOOTSTRAP.exec(text);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!.split(',').filter(Boolean));
        }
      });
    });
    child.stderr!.resume(); // keep draining librdkafka's log so kcat never blocks on a full pipe
    child.unref();
    return { brokers, processGroup: child.pid!, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
