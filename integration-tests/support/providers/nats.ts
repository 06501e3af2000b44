import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { NatsServer } from '../nats-server';
import { isListening } from '../net';
import { missingProgram } from '../programs';
import type { ServiceProvider } from '../service';

const LOCAL_URL = 'nats://127.0.0.1:4222';

/** Why `url` cannot serve the suites (no answer, or JetStream off), `undefined` when it can. */
async function refusal(url: string): Promise<string | undefined> {
  try {
    const nc = await connect({ servers: url, timeout: 3000, reconnect: false });
    try {
      await (await jetstreamManager(nc)).getAccountInfo();
      return undefined;
    } finally {
      await nc.close();
    }
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * NATS with JetStream: NATS_URL, else 127.0.0.1:4222, else a `nats-server -js` this run starts, else
 * skipped with the reason.
 */
export const natsProvider: ServiceProvider = async () => {
  const fromEnv = process.env.NATS_URL;
  if (fromEnv) {
    const why = await refusal(fromEnv);
    if (!why) return { url: fromEnv, source: 'env', stop: async () => {} };
    return { skip: `NATS_URL is set (${fromEnv}) but no JetStream answers there: ${why}` };
  }
  if (await isListening(4222)) {
    const why = await refusal(LOCAL_URL);
    if (!why) return { url: LOCAL_URL, source: 'local', stop: async () => {} };
    return { skip: `something listens on 127.0.0.1:4222 but no JetStream answers: ${why}` };
  }
  if (missingProgram(['nats-server'])) {
    return { skip: 'no NATS_URL, nothing on 127.0.0.1:4222, and no nats-server program to start' };
  }
  const server = await NatsServer.start();
  return { url: server.url, source: 'started', stop: () => server.dispose() };
};
