import { extendHandlerContext } from '../src/kit/handler-context';
import type { HandlerContext } from '../src/runner/handler-context';

/** A context whose signal is a plain field. */
const plainContext = (): HandlerContext => ({
  scope: 's',
  key: 'k',
  fencingToken: 7,
  attempt: 2,
  outcome: 'ACQUIRED',
  signal: new AbortController().signal,
});

describe('extendHandlerContext', () => {
  it('copies the context, adds the fields, and reads signal only when the handler does', () => {
    let reads = 0;
    const controller = new AbortController();
    const context: HandlerContext = {
      scope: 's',
      key: 'k',
      fencingToken: 7,
      attempt: 2,
      outcome: 'ACQUIRED',
      get signal() {
        reads += 1;
        return controller.signal;
      },
    };
    const extended = extendHandlerContext(context, { message: 'm' });
    expect(reads).toBe(0);
    expect(extended).toMatchObject({
      scope: 's',
      key: 'k',
      fencingToken: 7,
      attempt: 2,
      outcome: 'ACQUIRED',
      message: 'm',
    });
    expect(extended.signal).toBe(controller.signal);
    expect(reads).toBe(1);
  });

  it('reads signal from signalSource when one is given, on the first read only', () => {
    let reads = 0;
    const controller = new AbortController();
    const source = {
      get signal() {
        reads += 1;
        return controller.signal;
      },
    };
    const extended = extendHandlerContext(plainContext(), { message: 'm' }, source);
    expect(reads).toBe(0);
    expect(extended.signal).toBe(controller.signal);
    expect(reads).toBe(1);
  });

  it('an extra field replaces a context field, signal included', () => {
    const context = extendHandlerContext(extendHandlerContext(plainContext(), {}), {
      attempt: 3,
      signal: 'replaced',
    });
    expect(context.attempt).toBe(3);
    expect(context.signal).toBe('replaced');
    expect({ ...context }).toMatchObject({ attempt: 3, signal: 'replaced' });
  });

  it('a spread copies the fields but not the lazy signal (the documented reason to use it)', () => {
    const context = extendHandlerContext(plainContext(), { message: 'm' });
    expect(Object.keys(context).sort()).toEqual([
      'attempt',
      'fencingToken',
      'key',
      'message',
      'outcome',
      'scope',
    ]);
    expect(context.signal).toBeInstanceOf(AbortSignal);
  });
});
