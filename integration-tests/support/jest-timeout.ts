// Integration tests talk to real services (and start processes): give each test up to two minutes.
// (Jest reads `testTimeout` only from the root config, not from a project, so it is set here.)
jest.setTimeout(120_000);
