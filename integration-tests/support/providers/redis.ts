import { execFileSync } from 'node:child_process';
import { isListening } from '../net';
import { RedisServer } from '../redis-server';
import type { ServiceProvider } from '../service';

/** Redis: REDIS_URL, else 127.0.0.1:6379, else a redis-server this run starts, else skipped. */
export const redisProvider: ServiceProvider = async () => {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, source: 'env', stop: async () => {} };
  if (await isListening(6379))
    return { url: 'redis://127.0.0.1:6379', source: 'local', stop: async () => {} };
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
  } catch {
    return { skip: 'no REDIS_URL, nothing on 127.0.0.1:6379, and no redis-server program to start' };
  }
  const server = await RedisServer.start();
  return { url: server.url, source: 'started', stop: () => server.dispose() };
};
