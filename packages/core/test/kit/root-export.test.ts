import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as root from '../../src';
import * as kit from '../../src/kit';

describe('kit: the sub-path export', () => {
  it('exports exactly the kit pieces', () => {
    expect(Object.keys(kit).sort()).toEqual(
      [
        // the pipeline and the port contract
        'MessagePipeline',
        'decide',
        // the consumer around it
        'AdapterLog',
        'LeaseKeeperSet',
        'MessageTelemetry',
        'StopSignal',
        'StoreGate',
        'TypedEventEmitter',
        'check',
        // the vocabulary of dead letters
        'DEAD_LETTER_FIELDS',
        'NO_CLAIM_OUTCOME',
      ].sort(),
    );
  });

  it('names at most 30 things, types included: the port contract and what a port author needs', () => {
    const source = readFileSync(join(__dirname, '../../src/kit/index.ts'), 'utf8');
    expect(source).not.toMatch(/export \*/);
    const names = [...source.matchAll(/export (?:type )?\{([^}]*)\}/g)].flatMap((m) =>
      m[1]!
        .split(',')
        .map((n) => n.trim())
        .filter(Boolean),
    );
    expect(names.length).toBeLessThanOrEqual(30);
  });

  it('the root export (what users import) holds none of them', () => {
    const rootNames = new Set(Object.keys(root));
    expect(Object.keys(kit).filter((name) => rootNames.has(name))).toEqual([]);
  });

  it('the root export has no plumbing: script key counts, the result codec, the dead-letter vocabulary', () => {
    const rootNames = Object.keys(root);
    for (const name of [
      'SCRIPT_NUMBER_OF_KEYS',
      'encodeResult',
      'decodeResult',
      'DEAD_LETTER_FIELDS',
      'NO_CLAIM_OUTCOME',
      'deadLetterReasonOf',
    ]) {
      expect(rootNames).not.toContain(name);
    }
  });

  it('resolves by its package name, as adapters import it', async () => {
    const byName = await import('@idempotent-consumer/core/kit');
    expect(Object.keys(byName).sort()).toEqual(Object.keys(kit).sort());
  });
});
