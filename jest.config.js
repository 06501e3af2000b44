// Two projects: `unit` (fast, in-process, fakes allowed) and `integration` (real services, found or started
// by integration-tests/support/global-setup.ts; a suite whose service is missing is reported as skipped).
const transform = {
  '^.+\\.tsx?$': [
    '@swc/jest',
    {
      // Decorators as TypeScript's experimentalDecorators and emitDecoratorMetadata compile them (NestJS).
      jsc: {
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true },
        target: 'es2022',
      },
      module: { type: 'commonjs' },
    },
  ],
};
const moduleNameMapper = {
  '^@idempotent-consumer/([a-z-]+)$': '<rootDir>/packages/$1/src',
  // sub-path entries, such as @idempotent-consumer/http/express
  '^@idempotent-consumer/([a-z-]+)/([a-z-]+)$': '<rootDir>/packages/$1/src/$2',
};

/** @type {import('jest').Config} */
module.exports = {
  // On a 2-core machine Jest runs every suite in its own process; one forgotten socket or timer would keep
  // it alive after the last test and stall CI. Exit after the run; global-teardown.ts names what was left.
  forceExit: true,
  // Two test files at a time, also on a 2-core machine (Jest's default there is one): the suites spend most
  // of their time waiting on brokers, group joins, leases and child processes (a serial run used about a
  // quarter of the CPU), and every suite works on names of its own (topics, groups, queues, key prefixes,
  // schemas) or on servers it starts itself, so two suites do not see each other. `npm test` runs this
  // config on two Node releases (scripts/jest-each-node.mjs), at the same time with JEST_EACH_NODE_PARALLEL=1.
  maxWorkers: 2,
  reporters: ['default', '<rootDir>/scripts/summary-reporter.js'],
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      roots: ['<rootDir>/packages', '<rootDir>/bench', '<rootDir>/model'],
      testMatch: ['**/test/**/*.test.ts'],
      transform,
      moduleNameMapper,
    },
    {
      displayName: 'integration',
      testEnvironment: 'node',
      roots: ['<rootDir>/integration-tests'],
      testMatch: ['**/src/**/*.test.ts'],
      transform,
      moduleNameMapper,
      globalSetup: '<rootDir>/integration-tests/support/global-setup.ts',
      globalTeardown: '<rootDir>/integration-tests/support/global-teardown.ts',
      setupFilesAfterEnv: ['<rootDir>/integration-tests/support/jest-timeout.ts'],
    },
  ],
};
