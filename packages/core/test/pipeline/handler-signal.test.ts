import { getEventListeners } from 'node:events';
import { HandlerSignal } from '../../src/pipeline/handler-signal';

describe('HandlerSignal', () => {
  it("aborts with the runner's signal (a lost claim), with its reason", () => {
    const run = new AbortController();
    const signal = new HandlerSignal(new AbortController().signal).following(run).signal;
    expect(signal.aborted).toBe(false);
    const lost = new Error('lease lost');
    run.abort(lost);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe(lost);
  });

  it('aborts when stop() abandons the delivery, also when that came before the first read', () => {
    const abandoning = new AbortController();
    const read = new HandlerSignal(abandoning.signal).following(new AbortController());
    const early = read.signal;
    abandoning.abort();
    expect(early.aborted).toBe(true);
    const late = new HandlerSignal(abandoning.signal).following(new AbortController()).signal;
    expect(late.aborted).toBe(true);
  });

  it("listens to the consumer's signal only once read, and no longer once disposed", () => {
    const abandoning = new AbortController();
    const unread = new HandlerSignal(abandoning.signal).following(new AbortController());
    expect(getEventListeners(abandoning.signal, 'abort')).toHaveLength(0);
    const read = new HandlerSignal(abandoning.signal).following(new AbortController());
    void read.signal;
    expect(getEventListeners(abandoning.signal, 'abort')).toHaveLength(1);
    read.dispose();
    unread.dispose();
    expect(getEventListeners(abandoning.signal, 'abort')).toHaveLength(0);
  });
});
