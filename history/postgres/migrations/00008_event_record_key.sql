-- +goose Up
-- A key the client draws for each Record call, so that a Record tried
-- again after its COMMIT's answer was lost (the connection dropped) finds
-- the event it already stored instead of storing it twice. Rows written
-- before this version have none (NULLs do not collide).
ALTER TABLE events ADD COLUMN record_key TEXT;
CREATE UNIQUE INDEX events_record_key ON events (record_key);

-- +goose Down
DROP INDEX events_record_key;
ALTER TABLE events DROP COLUMN record_key;
