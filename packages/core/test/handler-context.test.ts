import { extendHandlerContext } from '../src/kit';
import type { HandlerContext } from '../src/runner/idempotency';

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
});
