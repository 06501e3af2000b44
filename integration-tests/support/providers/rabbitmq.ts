import type { ServiceProvider } from '../service';

/** rabbitmq: not implemented yet. */
export const rabbitmqProvider: ServiceProvider = async () => ({
  skip: 'the rabbitmq provider is not implemented yet',
});
