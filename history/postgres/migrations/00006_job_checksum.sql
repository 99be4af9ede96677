-- +goose Up
-- The plan checksum a job was confirmed with, so that a job run again
-- after a restart or a take-over still refuses a plan that changed.
ALTER TABLE jobs ADD COLUMN checksum TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN checksum;
