/**
 * `@idempotent-consumer/http/nest`: the `Idempotency-Key` header for NestJS 10 and 11, on its Express and
 * Fastify platforms: a module that installs an interceptor, and an `@Idempotent()` route decorator.
 * @packageDocumentation
 */

export { IdempotencyInterceptor, type NestIdempotencyOptions } from './nest-interceptor';
export { IDEMPOTENCY_OPTIONS, IdempotencyModule, type IdempotencyModuleAsyncOptions } from './nest-module';
export {
  IDEMPOTENT_ROUTE,
  IdempotencyContext,
  Idempotent,
  type IdempotentRouteOptions,
  type NestHttpRequest,
} from './nest-route';
