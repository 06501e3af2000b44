// The NestJS example of packages/http/README.md, verbatim: typechecked with the package's tests.
import 'reflect-metadata';
import { type HandlerContext, Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { IdempotencyContext, IdempotencyModule, Idempotent } from '@idempotent-consumer/http/nest';
import { Body, Controller, Module, Post, UseGuards } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';

/** Your authentication guard: refuses the request, or sets `request.user` from verified credentials. */
declare class AuthGuard {
  canActivate(): boolean;
}

@Controller('orders')
@UseGuards(AuthGuard)
class OrdersController {
  @Post()
  @Idempotent({ required: true })
  create(@Body() body: { amount: number }, @IdempotencyContext() claim?: HandlerContext) {
    // claim: { key, scope, fencingToken, attempt, outcome, signal }
    return { id: crypto.randomUUID(), ...body, fencingToken: claim?.fencingToken };
  }
}

@Module({
  imports: [
    IdempotencyModule.forRootAsync({
      // The runner from your own provider (here a factory); inject: [Idempotency] takes yours.
      useFactory: () => ({
        idempotency: new Idempotency(
          { store: new RedisIdempotencyStore({ redis: new Redis() }, { keyPrefix: 'api' }) },
          { leaseMs: 30_000 },
        ),
        // The tenant is who authentication says the caller is, never a header the client chooses.
        tenant: (request) => (request.user as { accountId: string } | undefined)?.accountId,
      }),
    }),
  ],
  controllers: [OrdersController],
})
class AppModule {}

async function main() {
  const app = await NestFactory.create(AppModule);
  await app.listen(3000);
}
void main();
