-- +goose Up
-- The notifications' outbox: one notice per recorded event (written in
-- the event's transaction) or per release that began rolling out, and
-- each receiver's cursor (the last notice it was given). IDs are never
-- reused (AUTOINCREMENT), so a cursor stays right after a prune.
CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id   INTEGER NOT NULL DEFAULT 0,
    started    INTEGER NOT NULL DEFAULT 0,
    event      TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX outbox_created_at ON outbox (created_at);
CREATE TABLE outbox_cursors (
    receiver TEXT    PRIMARY KEY,
    last_id  INTEGER NOT NULL
);

-- +goose Down
DROP TABLE outbox_cursors;
DROP TABLE outbox;
