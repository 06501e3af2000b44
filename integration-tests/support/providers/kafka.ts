import type { ServiceProvider } from '../service';

/** kafka: not implemented yet. */
export const kafkaProvider: ServiceProvider = async () => ({
  skip: 'the kafka provider is not implemented yet',
});
