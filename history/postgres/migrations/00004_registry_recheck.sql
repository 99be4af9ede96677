-- +goose Up
-- Adaptive re-checks of mutable tags: how many HEADs in a row found the
-- same digest, and when the next is due (Unix nanoseconds; 0: now).
ALTER TABLE registry_tags ADD COLUMN stable INTEGER NOT NULL DEFAULT 0;
ALTER TABLE registry_tags ADD COLUMN next_check BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE registry_tags DROP COLUMN next_check;
ALTER TABLE registry_tags DROP COLUMN stable;
