/** The value of a required environment variable of a worker process. @throws Error when it is not set. */
export function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}
