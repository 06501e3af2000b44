import type { IdempotencyStore } from '@idempotent-consumer/core';

/**
 * A store whose heartbeats (`extend`) do not arrive until `unstall()`: what a worker sees when its process
 * stalls (a long GC pause, a frozen container) or its network drops while the handler runs. Every other
 * call goes straight to `store`.
 */
export function stalledHeartbeats(store: IdempotencyStore): { store: IdempotencyStore; unstall(): void } {
  let unstall!: () => void;
  const gate = new Promise<void>((resolve) => {
    unstall = resolve;
  });
  const extend: IdempotencyStore['extend'] = async (...args) => {
    await gate;
    return store.extend(...args);
  };
  const proxy = new Proxy(store, {
    get(target, property) {
      if (property === 'extend') return extend;
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: proxy, unstall };
}
