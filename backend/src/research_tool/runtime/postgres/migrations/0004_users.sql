-- Issue 44: users with API keys of their own (a salted scrypt hash of each key, never the key), the audit log,
-- and each session's owner (NULL: the local single user). A start over a user's limits is refused in the same
-- transaction that counts them (runtime/postgres/session_store.py: a per-user advisory lock orders the starts of
-- one user across every API node).
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS owner text;
CREATE INDEX IF NOT EXISTS sessions_by_owner ON sessions (owner, status);

CREATE TABLE IF NOT EXISTS users (
    name text PRIMARY KEY,
    key_id text NOT NULL UNIQUE,
    key_hash text NOT NULL,
    admin boolean NOT NULL DEFAULT false,
    created_at text NOT NULL,
    revoked_at text
);

CREATE TABLE IF NOT EXISTS audit (
    id bigserial PRIMARY KEY,
    ts text NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    target text,
    detail text
);
CREATE INDEX IF NOT EXISTS audit_by_actor ON audit (actor, action, ts);
