import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidOptionError } from '@idempotent-consumer/core';
import { inboxSchemaSql, inboxStatements, quoteTable, type SqlDialect } from '../src';

describe('inbox DDL and statements', () => {
  it.each<[SqlDialect, string]>([
    ['postgres', 'postgres/0001_idempotency_inbox.sql'],
    ['mysql', 'mysql/0001_idempotency_inbox.sql'],
  ])('the %s migration file is inboxSchemaSql() for the default table', (dialect, file) => {
    const migration = readFileSync(join(__dirname, '..', 'migrations', file), 'utf8');
    expect(migration.replace(/^--.*\n/gm, '')).toBe(inboxSchemaSql(dialect));
  });

  it('quotes plain and schema-qualified names per dialect', () => {
    expect(quoteTable('postgres', 'billing.inbox')).toBe('"billing"."inbox"');
    expect(quoteTable('mysql', 'billing.inbox')).toBe('`billing`.`inbox`');
  });

  it.each(['', 'a.b.c', 'inbox; DROP TABLE x', 'in"box', 'in`box', '1inbox', 'a'.repeat(64)])(
    'rejects the table name %p with InvalidOptionError',
    (name) => {
      expect(() => inboxStatements('postgres', name)).toThrow(InvalidOptionError);
      expect(() => inboxStatements('mysql', name)).toThrow(InvalidOptionError);
    },
  );

  it('rejects an unknown dialect', () => {
    expect(() => inboxStatements('sqlite' as SqlDialect)).toThrow(/dialect must be 'postgres' or 'mysql'/);
  });

  it('names the expiry index after the table, and every cleanup statement filters on expires_at', () => {
    for (const dialect of ['postgres', 'mysql'] as const) {
      const s = inboxStatements(dialect, 'app.payments_inbox');
      expect(s.schema.join('\n')).toContain('payments_inbox_expires_at');
      expect(s.deleteExpired).toMatch(/WHERE expires_at </);
    }
  });
});
