-- idempotent-consumer transactional inbox (MySQL 8, MariaDB 10.5+). Same DDL as inboxSchemaSql('mysql').
CREATE TABLE IF NOT EXISTS `idempotency_inbox` (
  scope VARBINARY(764) NOT NULL,
  idempotency_key VARBINARY(2048) NOT NULL,
  fencing_token BIGINT NOT NULL,
  committed_at DATETIME(3) NULL,
  result MEDIUMTEXT NULL,
  expires_at DATETIME(3) NOT NULL,
  PRIMARY KEY (scope, idempotency_key),
  KEY `idempotency_inbox_expires_at` (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
