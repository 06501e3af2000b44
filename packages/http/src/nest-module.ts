import type {
  DynamicModule,
  InjectionToken,
  ModuleMetadata,
  OptionalFactoryDependency,
  Provider,
} from '@nestjs/common';
import { APP_INTERCEPTOR, Reflector } from '@nestjs/core';
import { IdempotencyInterceptor, type NestIdempotencyOptions } from './nest-interceptor';
import type { NestHttpRequest } from './nest-route';

/** The injection token of the module's options (the runner among them). */
export const IDEMPOTENCY_OPTIONS = '@idempotent-consumer/http:options';

/** {@link IdempotencyModule.forRootAsync}'s argument: where the options, and so the runner, come from. */
export interface IdempotencyModuleAsyncOptions<Req extends NestHttpRequest = NestHttpRequest> {
  /** Modules that export what `useFactory` injects (the module that provides your `Idempotency`). */
  readonly imports?: ModuleMetadata['imports'];
  /** Providers passed to `useFactory`, in order (your `Idempotency` runner's token). */
  readonly inject?: (InjectionToken | OptionalFactoryDependency)[];
  /** Builds the options from what was injected. */
  readonly useFactory: (
    ...injected: never[]
  ) => NestIdempotencyOptions<Req> | Promise<NestIdempotencyOptions<Req>>;
}

/**
 * The NestJS module of the `Idempotency-Key` header: installs {@link IdempotencyInterceptor} for every
 * route of the app (`APP_INTERCEPTOR`), on the runner it is given. Import it once, in the root module.
 */
// biome-ignore lint/complexity/noStaticOnlyClass: NestJS modules are classes.
export class IdempotencyModule {
  /** The module with these options; `idempotency` is the runner. */
  static forRoot<Req extends NestHttpRequest = NestHttpRequest>(
    options: NestIdempotencyOptions<Req>,
  ): DynamicModule {
    return IdempotencyModule.#module([], { provide: IDEMPOTENCY_OPTIONS, useValue: options });
  }

  /**
   * The module with options built from injected providers: the runner comes from your own provider
   * (`inject: [Idempotency]`, with the module that provides it in `imports`).
   */
  static forRootAsync<Req extends NestHttpRequest = NestHttpRequest>(
    options: IdempotencyModuleAsyncOptions<Req>,
  ): DynamicModule {
    return IdempotencyModule.#module(options.imports ?? [], {
      provide: IDEMPOTENCY_OPTIONS,
      useFactory: options.useFactory as (...args: unknown[]) => unknown,
      inject: options.inject ?? [],
    });
  }

  static #module(imports: ModuleMetadata['imports'], optionsProvider: Provider): DynamicModule {
    return {
      module: IdempotencyModule,
      imports,
      providers: [
        optionsProvider,
        {
          provide: APP_INTERCEPTOR,
          useFactory: (reflector: Reflector, options: NestIdempotencyOptions) =>
            new IdempotencyInterceptor(reflector, options),
          inject: [Reflector, IDEMPOTENCY_OPTIONS],
        },
      ],
      exports: [IDEMPOTENCY_OPTIONS],
    };
  }
}
