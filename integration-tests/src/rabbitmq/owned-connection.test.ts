import { TopologyMismatchError } from '@idempotent-consumer/core';
import { createIdempotentConsumer, type IdempotentConsumer } from '@idempotent-consumer/rabbitmq';
import { type ChannelModel, connect } from 'amqplib';
import { AmqpProxy, type CloseMethod } from '../../support/amqp-proxy';
import { settlesWithin, waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { FAST, RabbitFixture, recordEvents } from './fixture';

/**
 * The connections a consumer opens with `connect`, each with whether it closed: what a consumer owns
 * must be closed by it, or the process keeps amqplib's socket and heartbeat timer and never exits.
 */
class Connections {
  readonly opened: ChannelModel[] = [];
  readonly closed = new Set<ChannelModel>();
  /** Resolves the next `connect` when set: lets a test act while a connection is being opened. */
  gate: Promise<void> | undefined;
  /** How many times `connect` was called (counted before the gate). */
  calls = 0;

  constructor(public url: string) {}

  readonly connect = async (): Promise<ChannelModel> => {
    this.calls += 1;
    await this.gate;
    const connection = await connect(this.url);
    this.opened.push(connection);
    connection.on('close', () => this.closed.add(connection));
    return connection;
  };

  get open(): ChannelModel[] {
    return this.opened.filter((c) => !this.closed.has(c));
  }

  /** Closes whatever the consumer left open, so a failing test does not keep the worker alive. */
  async closeLeft(): Promise<void> {
    await Promise.allSettled(this.open.map((c) => c.close()));
  }
}

describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: the connections it opens', (urls) => {
  jest.setTimeout(60_000);
  const fx = RabbitFixture.eachTest(urls);
  let connections: Connections;
  beforeEach(() => {
    connections = new Connections(urls.rabbitmq);
  });
  afterEach(() => connections.closeLeft());

  function consumer(topology: 'assert' | 'check'): IdempotentConsumer<unknown> {
    const c = createIdempotentConsumer(
      { idempotency: fx.idempotency(), connect: connections.connect, logger: false },
      { ...FAST, queue: fx.queue, topology, reconnectBackoff: { baseMs: 50, maxMs: 100, jitter: 'none' } },
      async () => {},
    );
    fx.consumers.push(c);
    return c;
  }

  it('a start that fails on the topology closes the connection it opened', async () => {
    // topology: 'check' and no delay tier declared: the check fails after `connect` opened a connection.
    const c = consumer('check');
    await expect(c.start()).rejects.toBeInstanceOf(TopologyMismatchError);
    expect(c.state).toBe('stopped');
    expect(connections.opened).toHaveLength(1);
    expect(connections.open.length).toBe(0);
  });

  it('each failed reconnect attempt closes the connection it opened', async () => {
    const c = consumer('assert');
    const events = recordEvents(c);
    await c.start();
    // The dead-letter exchange now exists with another type: every `assert` (each reconnect) fails with
    // 406 PRECONDITION_FAILED after its connection opened.
    const dlx = c.topology.deadLetterExchange;
    await fx.channel.deleteExchange(dlx);
    await fx.channel.assertExchange(dlx, 'fanout', { durable: true });
    await connections.opened[0]!.close();
    await waitFor('three failed reconnect attempts', () => events.brokerError.length >= 3, 20_000);
    expect(events.brokerError[0]!.error).toBeInstanceOf(TopologyMismatchError);
    await fx.channel.deleteExchange(dlx);
    await waitFor('the reconnect', () => events.reconnected.length === 1, 20_000);
    expect(c.state).toBe('running');
    // One connection per attempt: all closed but the one the consumer runs on.
    expect(connections.opened.length).toBeGreaterThanOrEqual(5);
    expect(connections.open.length).toBe(1);
    expect(connections.open[0] === connections.opened.at(-1)).toBe(true);
    await c.stop();
    expect(connections.open.length).toBe(0);
  });

  it('stop() during start() waits for it and closes what it opened; nothing is consumed', async () => {
    const c = consumer('assert');
    const events = recordEvents(c);
    let release!: () => void;
    connections.gate = new Promise((resolve) => {
      release = resolve;
    });
    const starting = c.start();
    // start() is past the store check and waits in `connect`.
    await waitFor('start() to call connect', () => connections.calls === 1);
    expect(c.state).toBe('starting');
    const stopping = c.stop();
    release();
    await Promise.all([starting, stopping]);
    expect(c.state).toBe('stopped');
    expect(events.started).toEqual([]);
    expect(events.stopped).toHaveLength(1);
    // stop() gave up on the connect() under way: the connection it opens anyway is closed when it arrives.
    await waitFor(
      'the connection connect() opened to be closed',
      () => connections.opened.length === 1 && connections.open.length === 0,
    );
    expect((await fx.channel.checkQueue(fx.queue)).consumerCount).toBe(0);
  });

  it('stop() does not wait for a connect() that does not answer; the connection that arrives later is closed', async () => {
    const c = consumer('assert');
    let release!: () => void;
    connections.gate = new Promise((resolve) => {
      release = resolve;
    });
    const starting = c.start();
    await waitFor('start() to call connect', () => connections.calls === 1);
    // A broker host that does not answer: amqplib.connect waits for the TCP timeout (minutes).
    await c.stop();
    await starting;
    expect(c.state).toBe('stopped');
    expect(connections.opened).toHaveLength(0);
    release();
    await waitFor(
      'the late connection to be closed',
      () => connections.opened.length === 1 && connections.open.length === 0,
    );
  }, 15_000);

  it('stop() during a reconnect waits for the attempt under way and closes what it opened; nothing is consumed', async () => {
    const c = consumer('assert');
    const events = recordEvents(c);
    await c.start();
    let release!: () => void;
    connections.gate = new Promise((resolve) => {
      release = resolve;
    });
    await connections.opened[0]!.close();
    // The reconnect loop is past its backoff and waits in `connect`.
    await waitFor('the reconnect to call connect', () => connections.calls === 2);
    expect(c.state).toBe('reconnecting');
    const stopping = c.stop();
    release();
    await stopping;
    expect(c.state).toBe('stopped');
    expect(events.stopped).toHaveLength(1);
    // The attempt under way ended before stop() resolved: it gave up on its connect(), and the connection
    // that arrives anyway is closed; nothing is declared or consumed on it.
    await waitFor(
      'the connection of the attempt to be closed',
      () => connections.opened.length === 2 && connections.open.length === 0,
    );
    expect(events.reconnected).toEqual([]);
    expect((await fx.channel.checkQueue(fx.queue)).consumerCount).toBe(0);
  });

  /**
   * Starts a consumer through a proxy that forwards everything, then stops it with the proxy ending the
   * socket instead of forwarding the client's first `cutOn`: stop() must resolve all the same.
   */
  async function stopThroughCut(cutOn: CloseMethod): Promise<void> {
    await AmqpProxy.using(urls.rabbitmq, async (proxy, url) => {
      connections.url = url;
      const c = consumer('assert');
      const events = recordEvents(c);
      await c.start();
      proxy.cutOn = cutOn;
      const stopped = await settlesWithin('stop() to settle', c.stop());
      expect(stopped.status).toBe('fulfilled');
      expect(proxy.cut).toBe(1);
      expect(c.state).toBe('stopped');
      expect(events.stopped).toHaveLength(1);
      expect(connections.open.length).toBe(0);
    });
  }

  it('the broker going away while stop() closes the connection (no close-ok) neither ends the process with an unhandled error nor holds stop()', async () => {
    // amqplib emits 'error' on the connection ('Unexpected close'), and its close() never settles.
    await stopThroughCut('connection.close');
  }, 30_000);

  it('the broker going away while stop() closes a channel (no close-ok) does not hold stop()', async () => {
    // amqplib closes the channel when its connection closes, and calls close()'s callback only on a close-ok.
    await stopThroughCut('channel.close');
  }, 30_000);

  it('the broker going away while the topology check closes its channel (no close-ok) fails start() instead of holding it', async () => {
    await AmqpProxy.using(urls.rabbitmq, async (proxy, url) => {
      connections.url = url;
      proxy.cutOn = 'channel.close';
      const c = consumer('assert');
      const started = await settlesWithin('start() to settle', c.start());
      expect(started.status).toBe('rejected');
      expect(proxy.cut).toBe(1);
      expect(c.state).toBe('stopped');
      expect(connections.opened).toHaveLength(1);
      expect(connections.open.length).toBe(0);
    });
  }, 30_000);

  it('a second stop() resolves only once the consumer is stopped, as the first does', async () => {
    const c = consumer('assert');
    const events = recordEvents(c);
    await c.start();
    let release!: () => void;
    connections.gate = new Promise((resolve) => {
      release = resolve;
    });
    await connections.opened[0]!.close();
    await waitFor('the reconnect to call connect', () => connections.calls === 2);
    const first = c.stop();
    const second = c.stop(); // a shutdown hook that runs twice (SIGTERM, then beforeExit)
    release();
    await second;
    expect(c.state).toBe('stopped');
    expect(events.stopped).toHaveLength(1);
    await first;
    await waitFor(
      'the connection of the attempt to be closed',
      () => connections.opened.length === 2 && connections.open.length === 0,
    );
  });
});
