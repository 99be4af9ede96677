-- +goose Up
-- The status page's live stream, kept for a short while so that every
-- replica's page shows the same events (the leader writes, all read;
-- readers are woken by NOTIFY fluxd_live).
CREATE TABLE live_events (
    id       BIGSERIAL PRIMARY KEY,
    instance TEXT   NOT NULL,
    type     TEXT   NOT NULL,
    data     BYTEA  NOT NULL,
    at       BIGINT NOT NULL
);
CREATE INDEX live_events_at ON live_events (at);

-- +goose Down
DROP TABLE live_events;
