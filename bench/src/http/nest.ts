import 'reflect-metadata';
import type { Server } from 'node:http';
import type { Idempotency } from '@idempotent-consumer/core';
import { IdempotencyModule } from '@idempotent-consumer/http/nest';
import { Body, Controller, type DynamicModule, Headers, HttpCode, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { NodeIdempotencyModule, StorageAdapterEnum } from '@node-idempotency/nestjs';
import { urlOf } from './client';
import { type BenchServer, ORDER, raceWork } from './server';

/** A NestJS app on its Express platform with the two bench routes and `imports` (the layer, if any). */
async function start(
  name: string,
  imports: DynamicModule[],
  peerDecorator?: MethodDecorator,
): Promise<BenchServer> {
  const raceRuns = new Map<string, number>();
  const mark: MethodDecorator = peerDecorator ?? (() => undefined);

  @Controller()
  class Routes {
    @Post('orders')
    @HttpCode(201)
    @mark
    orders(@Body() _body: unknown) {
      return ORDER;
    }

    @Post('race')
    @HttpCode(201)
    @mark
    async race(@Headers('idempotency-key') key: string | undefined) {
      await raceWork(raceRuns, key);
      return ORDER;
    }
  }

  @Module({ imports, controllers: [Routes] })
  class AppModule {}

  const app = await NestFactory.create(AppModule, new ExpressAdapter(), { logger: false });
  await app.listen(0, '127.0.0.1');
  const server = app.getHttpServer() as Server;
  return { name, framework: 'NestJS', raceRuns, url: urlOf(server), close: () => app.close() };
}

/** The bare NestJS routes (Express platform). */
export const bareNest = () => start('NestJS (Express), bare route', []);

/** NestJS with `@idempotent-consumer/http/nest`. */
export const oursNest = (idempotency: Idempotency) =>
  start('NestJS (Express) + @idempotent-consumer/http', [IdempotencyModule.forRoot({ idempotency })]);

/**
 * NestJS with `@node-idempotency/nestjs` on its Redis storage (node-redis), its interceptor on the two
 * routes (its `@Idempotent()` decorator) as its README shows; its records are kept under `prefix` for 10 minutes.
 */
export async function nodeIdempotencyPeer(redisUrl: string, prefix: string): Promise<BenchServer> {
  const { Idempotent } = await import('@node-idempotency/nestjs');
  const module = await NodeIdempotencyModule.forRootAsync({
    storage: { adapter: StorageAdapterEnum.redis, options: { url: redisUrl } },
    cacheKeyPrefix: prefix,
    cacheTTLMS: 600_000,
  });
  // Its decorator installs its interceptor on the route.
  return start('NestJS (Express) + @node-idempotency/nestjs (Redis)', [module], Idempotent());
}
