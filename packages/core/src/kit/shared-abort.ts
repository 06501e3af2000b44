import { setMaxListeners } from 'node:events';

/**
 * An `AbortController` for a consumer's long-lived stop signal, which many concurrent waits listen to at
 * once (conflict waits, unprotected handlers, SQS requests, dead-letter produces: one listener each while
 * they last). Its signal has no listener limit: Node 20 would otherwise print a `MaxListenersExceededWarning`
 * ("Possible EventTarget memory leak detected") once more than 10 listen, although each listener is removed
 * when its wait ends.
 */
export function sharedAbortController(): AbortController {
  const controller = new AbortController();
  try {
    setMaxListeners(0, controller.signal);
  } catch {
    // An AbortController of another realm (a test runner's VM context), which `node:events` does not
    // recognise: it keeps the default limit, and only the warning is at stake.
  }
  return controller;
}
