-- 0008_web_sessions.sql -- browser sessions of the web UI. A session is
-- opened by signing in with a token and lives no longer than it: revoking or
-- expiring the token ends every session opened with it (the lookup joins
-- tokens). Only the SHA-256 of the session id is stored.
CREATE TABLE web_sessions (
    id_sha256   text PRIMARY KEY,
    token_id    bigint NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX web_sessions_token ON web_sessions (token_id);
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);
