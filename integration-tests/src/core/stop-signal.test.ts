import { execFileSync } from 'node:child_process';

/**
 * In a plain Node process (a test runner's VM context has AbortSignals of its own realm, which
 * `node:events` does not recognise), with the built package, as a consumer's process runs it.
 */
function warningsOf(script: string): string {
  return execFileSync(process.execPath, ['-e', script], { cwd: __dirname, encoding: 'utf8', stdio: 'pipe' });
}

describe('StopSignal (a consumer stop signal many waits listen to)', () => {
  it('takes 50 listeners without a MaxListenersExceededWarning, where a plain AbortController warns past 10 (Node 20)', () => {
    const script = (make: string) => `
      process.on('warning', (w) => process.stdout.write(w.name + '\\n'));
      const { StopSignal } = require('@idempotent-consumer/core/kit');
      const controller = ${make};
      let heard = 0;
      for (let i = 0; i < 50; i++) controller.signal.addEventListener('abort', () => heard++, { once: true });
      controller.abort();
      setImmediate(() => process.stdout.write('heard ' + heard + '\\n'));`;
    expect(warningsOf(script('new StopSignal()'))).toBe('heard 50\n');
    // The control that makes the line above a test: Node 20 warns past 10 listeners on a plain signal (Node 24
    // no longer does for an AbortSignal, so there the line above holds either way).
    const plain = warningsOf(script('new AbortController()'));
    if (process.versions.node.startsWith('20.'))
      expect(plain).toBe('MaxListenersExceededWarning\nheard 50\n');
    else expect(plain).toMatch(/heard 50\n$/);
  });
});
