-- +goose Up
-- The rest of what a config says of an image: its digest, platform and
-- labels (JSON), beside the creation time.
ALTER TABLE registry_images ADD COLUMN config_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE registry_images ADD COLUMN platform TEXT NOT NULL DEFAULT '';
ALTER TABLE registry_images ADD COLUMN labels TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE registry_images DROP COLUMN labels;
ALTER TABLE registry_images DROP COLUMN platform;
ALTER TABLE registry_images DROP COLUMN config_digest;
