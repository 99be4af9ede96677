-- +goose Up
-- promotion's bundles, their state per stage and the stages' pauses,
-- keyed by pipeline (not by instance): every fluxd running a stage of a
-- pipeline reads and writes the same rows. data is promotion's JSON.
CREATE TABLE promotion_bundles (
    pipeline   TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    data       TEXT    NOT NULL,
    PRIMARY KEY (pipeline, id)
);
CREATE INDEX promotion_bundles_created ON promotion_bundles (pipeline, created_at, id);

CREATE TABLE promotion_records (
    pipeline   TEXT    NOT NULL,
    stage      TEXT    NOT NULL,
    bundle     TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    data       TEXT    NOT NULL,
    PRIMARY KEY (pipeline, stage, bundle)
);

CREATE TABLE promotion_pauses (
    pipeline  TEXT    NOT NULL,
    stage     TEXT    NOT NULL,
    paused_by TEXT    NOT NULL,
    reason    TEXT    NOT NULL,
    since     INTEGER NOT NULL,
    PRIMARY KEY (pipeline, stage)
);

-- +goose Down
DROP TABLE promotion_pauses;
DROP TABLE promotion_records;
DROP TABLE promotion_bundles;
