#!/usr/bin/env node
import { processIo } from './io';
import { runCli } from './program';

runCli(process.argv.slice(2), processIo()).then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    process.stderr.write(`idempotent-consumer: ${String(error)}\n`);
    process.exitCode = 1;
  },
);
