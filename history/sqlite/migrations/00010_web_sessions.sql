-- +goose Up
-- The status page's sessions: the cookie's key only as its hash, the
-- token and identity sealed under a key only the cookie gives.
CREATE TABLE web_sessions (
    id         TEXT    PRIMARY KEY,
    token_hash TEXT    NOT NULL,
    sealed     BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX web_sessions_token ON web_sessions (token_hash, created_at);
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);

-- +goose Down
DROP TABLE web_sessions;
