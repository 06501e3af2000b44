import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, isListening, waitFor } from './net';

/**
 * A private `nats-server -js` on 127.0.0.1 that a run or a suite starts and stops by its pid, with its
 * JetStream data in a directory of its own.
 */
export class NatsServer {
  private constructor(
    readonly port: number,
    private readonly child: ChildProcess,
    private readonly dir: string,
  ) {}

  /** Starts a server on a free port, resolving once it accepts connections. */
  static async start(): Promise<NatsServer> {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'ic-nats-'));
    const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir];
    const server = new NatsServer(port, spawn('nats-server', args, { stdio: 'ignore' }), dir);
    await waitFor(`nats-server on port ${port}`, () => isListening(port), 10_000);
    return server;
  }

  /** `nats://127.0.0.1:<port>` */
  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Stops the server by its pid and removes its directory. */
  async dispose(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGTERM');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
