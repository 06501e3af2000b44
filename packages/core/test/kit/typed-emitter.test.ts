import { TypedEventEmitter } from '../../src/kit';

interface Events {
  settled: [{ key: string; action: 'ack' | 'retry' }];
  error: [{ error: unknown }];
  stopped: [];
}

describe('kit: TypedEventEmitter', () => {
  it('calls every listener with the payload, in order, and reports whether anyone listened', () => {
    const emitter = new TypedEventEmitter<Events>();
    const seen: string[] = [];
    expect(emitter.emit('settled', { key: 'a', action: 'ack' })).toBe(false);
    emitter.on('settled', (e) => void seen.push(`first ${e.key}`));
    emitter.once('settled', (e) => void seen.push(`once ${e.key}`));
    emitter.prependListener('settled', (e) => void seen.push(`prepended ${e.key}`));
    expect(emitter.emit('settled', { key: 'a', action: 'ack' })).toBe(true);
    expect(emitter.emit('settled', { key: 'b', action: 'retry' })).toBe(true);
    expect(seen).toEqual(['prepended a', 'first a', 'once a', 'prepended b', 'first b']);
  });

  it('isolates a listener that throws: the other listeners still run and emit does not throw', () => {
    const errors: [unknown, string | symbol][] = [];
    const emitter = new TypedEventEmitter<Events>({ onListenerError: (e, name) => errors.push([e, name]) });
    const seen: string[] = [];
    const bug = new Error('listener bug');
    emitter.on('settled', () => {
      throw bug;
    });
    emitter.on('settled', (e) => void seen.push(e.key));
    expect(() => emitter.emit('settled', { key: 'k', action: 'ack' })).not.toThrow();
    expect(seen).toEqual(['k']);
    expect(errors).toEqual([[bug, 'settled']]);
  });

  it('isolates a listener whose promise rejects: no unhandled rejection, reported to onListenerError', async () => {
    let reported: unknown;
    const done = new Promise<void>((resolve) => {
      const emitter = new TypedEventEmitter<Events>({
        onListenerError: (error) => {
          reported = error;
          resolve();
        },
      });
      emitter.on('stopped', async () => {
        throw new Error('async listener bug');
      });
      expect(emitter.emit('stopped')).toBe(true);
    });
    await done;
    expect((reported as Error).message).toBe('async listener bug');
  });

  it('an onListenerError that throws is isolated too', () => {
    const emitter = new TypedEventEmitter<Events>({
      onListenerError: () => {
        throw new Error('logger bug');
      },
    });
    emitter.on('stopped', () => {
      throw new Error('listener bug');
    });
    expect(() => emitter.emit('stopped')).not.toThrow();
  });

  it("'error' has no special meaning: without listeners emitting it returns false, never throws", () => {
    const emitter = new TypedEventEmitter<Events>();
    expect(emitter.emit('error', { error: new Error('broker down') })).toBe(false);
    const seen: unknown[] = [];
    emitter.on('error', (e) => void seen.push(e.error));
    expect(emitter.emit('error', { error: 'x' })).toBe(true);
    expect(seen).toEqual(['x']);
  });

  it('emitLazy builds the payload only when someone listens; hasListeners tells', () => {
    const emitter = new TypedEventEmitter<Events>();
    const build = jest.fn(() => ({ key: 'k', action: 'ack' as const }));
    expect(emitter.hasListeners('settled')).toBe(false);
    expect(emitter.emitLazy('settled', build)).toBe(false);
    expect(build).not.toHaveBeenCalled();
    const seen: unknown[] = [];
    const listener = (e: Events['settled'][0]) => void seen.push(e);
    emitter.on('settled', listener);
    expect(emitter.hasListeners('settled')).toBe(true);
    expect(emitter.emitLazy('settled', build)).toBe(true);
    expect(build).toHaveBeenCalledTimes(1);
    expect(seen).toEqual([{ key: 'k', action: 'ack' }]);
    emitter.off('settled', listener);
    expect(emitter.hasListeners('settled')).toBe(false);
  });

  it('emitLazy whose payload builder throws does not throw and reports it', () => {
    const errors: unknown[] = [];
    const emitter = new TypedEventEmitter<Events>({ onListenerError: (e) => errors.push(e) });
    emitter.on('settled', () => undefined);
    expect(
      emitter.emitLazy('settled', () => {
        throw new Error('payload bug');
      }),
    ).toBe(true);
    expect(errors).toHaveLength(1);
  });

  it('is typed by the event map (compile-time checks)', () => {
    const emitter = new TypedEventEmitter<Events>();
    // @ts-expect-error: not an event of the map
    emitter.on('acked', () => undefined);
    // @ts-expect-error: wrong payload shape
    emitter.emit('settled', { key: 1 });
    // @ts-expect-error: stopped has no payload
    emitter.emit('stopped', { key: 'a' });
    expect(emitter.emit('stopped')).toBe(false);
  });
});
