import { createInterface } from 'node:readline/promises';
import type { CliIo } from './io';
import { printable } from './output';

/** Thrown when a change needs a confirmation that was not given. The CLI exits with status 2. */
export class NotConfirmedError extends Error {
  override readonly name = 'NotConfirmedError';
}

/**
 * Asks `text [y/N]` on stderr, its control characters written out by `printable`, and reads the answer from
 * stdin. It resolves when the answer is `y` or `yes`. With `yes`, the `--yes` flag, it does not ask. When
 * nobody can answer because stdin is not a terminal, and `yes` is not set, it rejects with
 * {@link NotConfirmedError} rather than guess.
 */
export async function confirm(io: CliIo, text: string, yes: boolean): Promise<void> {
  if (yes) return;
  const question = printable(text); // it names a key, which may hold control characters
  if (!io.interactive) {
    throw new NotConfirmedError(`${question} Not confirmed: stdin is not a terminal; pass --yes to confirm`);
  }
  const rl = createInterface({ input: io.stdin, output: io.stderr, terminal: false });
  try {
    // End of input, by Ctrl-D or a closed pipe, counts as "no".
    const answer = await new Promise<string>((resolve) => {
      // readline emits 'close' before the answer's promise settles when the input ends right after it.
      rl.once('close', () => setImmediate(() => resolve('')));
      rl.question(`${question} [y/N] `).then(
        (text) => resolve(text.trim().toLowerCase()),
        () => resolve(''),
      );
    });
    if (answer !== 'y' && answer !== 'yes') throw new NotConfirmedError('Not confirmed; nothing changed');
  } finally {
    rl.close();
  }
}
