-- +goose Up
-- A sync's objects, one by one (JSON of history.SyncDetail; '' for other
-- events): each reader's view of a sync event is rendered from those it
-- may see.
ALTER TABLE events ADD COLUMN sync TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE events DROP COLUMN sync;
