-- +goose Up
-- Registry metadata, shared by every instance: it describes public facts
-- about images, not anything an instance did.
CREATE TABLE registry_tags (
    repository TEXT   NOT NULL,
    tag        TEXT   NOT NULL,
    digest     TEXT   NOT NULL,
    checked_at BIGINT NOT NULL, -- Unix nanoseconds
    PRIMARY KEY (repository, tag)
);

CREATE TABLE registry_images (
    digest     TEXT   PRIMARY KEY, -- the manifest digest a tag points at
    created_at BIGINT NOT NULL     -- Unix nanoseconds; 0 when unknown
);

-- +goose Down
DROP TABLE registry_images;
DROP TABLE registry_tags;
