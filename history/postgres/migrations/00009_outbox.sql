-- +goose Up
-- The notifications' outbox: one notice per recorded event (written in
-- the event's transaction) or per release that began rolling out, and
-- each receiver's cursor (the last notice it was given). Writers take a
-- transaction-scoped advisory lock before inserting, so that notices
-- commit in the order of their IDs and a reader never passes one that
-- has yet to commit.
CREATE TABLE outbox (
    id         BIGSERIAL PRIMARY KEY,
    event_id   BIGINT  NOT NULL DEFAULT 0,
    started    BOOLEAN NOT NULL DEFAULT FALSE,
    event      TEXT    NOT NULL,
    created_at BIGINT  NOT NULL
);
CREATE INDEX outbox_created_at ON outbox (created_at);
CREATE TABLE outbox_cursors (
    receiver TEXT   PRIMARY KEY,
    last_id  BIGINT NOT NULL
);

-- +goose Down
DROP TABLE outbox_cursors;
DROP TABLE outbox;
