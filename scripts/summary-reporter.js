// Jest reporter that ends the run with one plain line, `Summary: N passed, N failed, N skipped`, after
// Jest's own summary, so any CI can read the totals. Skipped tests include suites whose service was
// not found (their titles carry the reason).
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    const line = `Summary: ${results.numPassedTests} passed, ${results.numFailedTests} failed, ${skipped} skipped\n`;
    // Printed at exit, after Jest's own summary, so it is the run's closing line.
    process.once('exit', () => process.stdout.write(line));
  }
}
module.exports = SummaryReporter;
