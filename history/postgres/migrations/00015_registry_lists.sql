-- +goose Up
-- Tag lists as last read, per repository, so that a restarted fluxd does
-- not list every repository again before its first automator pass.
-- Registry facts, shared like registry_tags. tags is the sorted list
-- joined by newlines (a tag holds none); read_at is when the read that
-- found it began (Unix nanoseconds): of two replicas' lists, the one read
-- last is kept.
CREATE TABLE registry_lists (
    repository TEXT    PRIMARY KEY,
    tags       TEXT    NOT NULL,
    stable     INTEGER NOT NULL,
    next_read  BIGINT  NOT NULL, -- Unix nanoseconds
    read_at    BIGINT  NOT NULL  -- Unix nanoseconds
);

-- +goose Down
DROP TABLE registry_lists;
