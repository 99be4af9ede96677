-- +goose Up
-- The status page's live stream, kept for a short while so that every
-- replica's page shows the same events (the leader writes, all read).
CREATE TABLE live_events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    instance TEXT    NOT NULL,
    type     TEXT    NOT NULL,
    data     BLOB    NOT NULL,
    at       INTEGER NOT NULL
);
CREATE INDEX live_events_at ON live_events (at);

-- +goose Down
DROP TABLE live_events;
