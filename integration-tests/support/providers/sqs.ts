import type { ServiceProvider } from '../service';

/** sqs: not implemented yet. */
export const sqsProvider: ServiceProvider = async () => ({ skip: 'the sqs provider is not implemented yet' });
