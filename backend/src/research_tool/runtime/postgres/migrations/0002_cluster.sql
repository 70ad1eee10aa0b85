-- Cluster mode (issue 13): the session row is the job. A worker claims a queued session (or one whose
-- lease ran out: its worker died) with FOR UPDATE SKIP LOCKED, holds it by renewing `lease_expires_at`,
-- and clears both columns when it lets go. Times are the database's clock (now()), never a worker's.
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS worker_id TEXT;
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;

-- What a claim scans: the unfinished sessions, oldest first.
CREATE INDEX IF NOT EXISTS sessions_claimable ON sessions (created_at, id)
    WHERE status IN ('queued', 'running', 'awaiting_clarification', 'stopping', 'interrupted');

-- Wake-ups, sent on commit by the database itself, so every writer (any API node, worker or CLI) is
-- heard and a rolled-back write wakes nobody. The tables stay the truth: a listener re-reads them.
--   research_events:  '<session_id>:<seq>' after each event insert
--   research_queue:   '<session_id>' when a session becomes claimable (inserted, or its lease released)
--   research_control: 'stop:<id>', 'answers:<id>', 'deleted:<id>'
CREATE OR REPLACE FUNCTION research_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('research_events', NEW.session_id || ':' || NEW.seq);
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS events_notify ON events;
CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION research_notify_event();

CREATE OR REPLACE FUNCTION research_notify_session() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('research_control', 'deleted:' || OLD.id);
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM pg_notify('research_queue', NEW.id);
        RETURN NULL;
    END IF;
    IF NEW.stop_requested IS DISTINCT FROM OLD.stop_requested THEN
        PERFORM pg_notify('research_control', 'stop:' || NEW.id);
    END IF;
    IF NEW.clarify_answers IS NOT NULL AND NEW.clarify_answers IS DISTINCT FROM OLD.clarify_answers THEN
        PERFORM pg_notify('research_control', 'answers:' || NEW.id);
    END IF;
    IF NEW.worker_id IS NULL AND OLD.worker_id IS NOT NULL
            AND NEW.status IN ('queued', 'running', 'awaiting_clarification', 'stopping', 'interrupted') THEN
        PERFORM pg_notify('research_queue', NEW.id);
    END IF;
    RETURN NULL;
END $$;

-- Progress updates (the most frequent write) touch none of these columns and fire nothing.
DROP TRIGGER IF EXISTS sessions_notify_insert ON sessions;
CREATE TRIGGER sessions_notify_insert AFTER INSERT ON sessions
    FOR EACH ROW EXECUTE FUNCTION research_notify_session();
DROP TRIGGER IF EXISTS sessions_notify_delete ON sessions;
CREATE TRIGGER sessions_notify_delete AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION research_notify_session();
DROP TRIGGER IF EXISTS sessions_notify_update ON sessions;
CREATE TRIGGER sessions_notify_update AFTER UPDATE OF stop_requested, clarify_answers, worker_id ON sessions
    FOR EACH ROW EXECUTE FUNCTION research_notify_session();
