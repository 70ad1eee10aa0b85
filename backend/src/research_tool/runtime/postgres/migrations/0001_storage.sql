-- The storage of issue 13: what the SQLite files of a data dir hold (sessions.db, content.db, memory.db),
-- as Postgres tables. Checkpoints are AsyncPostgresSaver's own tables (its setup() migrates them).

CREATE TABLE sessions (
    id text PRIMARY KEY,
    query text NOT NULL,
    request jsonb NOT NULL,
    status text NOT NULL,
    stop_reason text,
    stop_requested boolean NOT NULL DEFAULT false,
    progress jsonb NOT NULL DEFAULT '{}',
    pending_questions jsonb NOT NULL DEFAULT '[]',
    clarify_answers jsonb,
    awaiting_since timestamptz,
    error text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX sessions_by_created ON sessions (created_at DESC, id);
CREATE INDEX sessions_by_status ON sessions (status, updated_at);

-- Per-session event counter: an append takes the next seq from here in the same statement as its INSERT,
-- so seq stays gapless and unique whichever process appends (the row lock orders concurrent appenders).
CREATE TABLE event_counters (
    session_id text PRIMARY KEY,
    last_seq bigint NOT NULL
);

CREATE TABLE events (
    session_id text NOT NULL,
    seq bigint NOT NULL,
    ts timestamptz NOT NULL,
    type text NOT NULL,
    phase text,
    message text NOT NULL,
    data jsonb NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE page_text (
    url text NOT NULL,
    sha256 text NOT NULL,
    length integer NOT NULL,
    text text NOT NULL,
    stored_at timestamptz NOT NULL,
    PRIMARY KEY (url, sha256)
);

CREATE TABLE page_text_refs (
    session_id text NOT NULL,
    url text NOT NULL,
    sha256 text NOT NULL,
    PRIMARY KEY (session_id, url, sha256)
);
CREATE INDEX page_text_refs_by_text ON page_text_refs (url, sha256);

CREATE TABLE provider_stats (
    domain text NOT NULL,
    provider text NOT NULL,
    calls bigint NOT NULL DEFAULT 0,
    results bigint NOT NULL DEFAULT 0,
    citations bigint NOT NULL DEFAULT 0,
    failures bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (domain, provider)
);

CREATE TABLE access_failures (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    domain text NOT NULL,
    provider text NOT NULL,
    url text,
    query text,
    error_type text NOT NULL,
    message text NOT NULL,
    iteration integer NOT NULL DEFAULT 0,
    at text NOT NULL
);
CREATE INDEX access_failures_provider ON access_failures (provider, id);
