-- +goose Up
-- Each job's log lines, kept after the job ends (the web page's job log).
CREATE TABLE job_log (
    job_id   TEXT    NOT NULL,
    instance TEXT    NOT NULL,
    seq      INTEGER NOT NULL,
    at       INTEGER NOT NULL,
    stage    TEXT    NOT NULL DEFAULT '',
    text     TEXT    NOT NULL,
    PRIMARY KEY (job_id, seq)
);

-- +goose Down
DROP TABLE job_log;
