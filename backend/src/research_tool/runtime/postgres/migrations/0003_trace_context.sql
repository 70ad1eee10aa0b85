-- OpenTelemetry (issue 36): the caller's traceparent and the first run's root span of a session, so that a run
-- after a restart or a lease takeover links its trace to the first one. NULL while tracing is off.
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS trace_context JSONB;
