-- idempotent-consumer transactional inbox (PostgreSQL 12+). Same DDL as inboxSchemaSql('postgres').
CREATE TABLE IF NOT EXISTS "idempotency_inbox" (
  scope text NOT NULL,
  idempotency_key text NOT NULL,
  fencing_token bigint NOT NULL,
  committed_at timestamptz NULL,
  result text NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (scope, idempotency_key)
);

CREATE INDEX IF NOT EXISTS "idempotency_inbox_expires_at" ON "idempotency_inbox" (expires_at);
