// Jest reporter that ends the run with one plain line, `Summary: N passed, N failed, N skipped`, after
// Jest's own summary, so any CI can read the totals. Skipped tests include suites whose service was
// not found (their titles carry the reason).
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    const line = `Summary: ${results.numPassedTests} passed, ${results.numFailedTests} failed, ${skipped} skipped\n`;
    // Reporters run in order, so this follows Jest's own summary. Written now rather than at exit: Jest's
    // forceExit ends the process before a write queued on a pipe at exit would reach the reader.
    process.stdout.write(line);
  }
}
module.exports = SummaryReporter;
