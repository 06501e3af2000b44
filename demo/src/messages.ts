import type { PaymentMessage } from './broker';

/** The messages of one run: every payment once, plus duplicates re-published later in the stream. */
export interface PaymentStream {
  readonly messages: PaymentMessage[];
  readonly payments: number;
  readonly duplicates: number;
}

/**
 * Builds `payments` payment messages and re-publishes `round(payments * duplicateRatio)` of them, each
 * duplicate placed at a random position after its original (a producer retry, an outbox replay).
 * Deterministic for a given `seed`, so both runs of the demo see the same stream.
 */
export function buildPaymentStream(
  runTag: string,
  payments: number,
  duplicateRatio: number,
  seed = 42,
): PaymentStream {
  let state = seed >>> 0;
  const random = () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  const originals: PaymentMessage[] = [];
  for (let i = 0; i < payments; i++) {
    const paymentId = `pay-${runTag}-${String(i).padStart(6, '0')}`;
    originals.push({
      paymentId,
      amountCents: 100 + Math.floor(random() * 99_900),
      idempotencyKey: paymentId,
    });
  }
  const messages = [...originals];
  const duplicates = Math.round(payments * duplicateRatio);
  for (let d = 0; d < duplicates; d++) {
    const index = Math.floor(random() * payments);
    const original = originals[index]!;
    const from = messages.indexOf(original) + 1;
    const at = from + Math.floor(random() * (messages.length - from + 1));
    messages.splice(at, 0, original);
  }
  return { messages, payments, duplicates };
}
