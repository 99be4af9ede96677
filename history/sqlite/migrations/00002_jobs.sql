-- +goose Up
CREATE TABLE jobs (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT    NOT NULL UNIQUE,
    instance    TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    stage       TEXT    NOT NULL DEFAULT '',
    spec        TEXT    NOT NULL DEFAULT '{}',
    plan        TEXT    NOT NULL DEFAULT '{}',
    commit_id   TEXT    NOT NULL DEFAULT '',
    error       TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    started_at  INTEGER NOT NULL DEFAULT 0,
    finished_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX jobs_instance_seq ON jobs (instance, seq DESC);
CREATE INDEX jobs_state ON jobs (state, seq);

-- +goose Down
DROP TABLE jobs;
