-- +goose Up
-- promotion's bundles, their state per stage and the stages' pauses,
-- keyed by pipeline (not by instance): the fluxds of every cluster
-- running a stage of a pipeline read and write the same rows. data is
-- promotion's JSON. write_key is the key of the write that set a
-- record's version, so that a write retried after its COMMIT's answer
-- was lost finds its own write instead of a conflict.
CREATE TABLE promotion_bundles (
    pipeline   TEXT   NOT NULL,
    id         TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    data       TEXT   NOT NULL,
    PRIMARY KEY (pipeline, id)
);
CREATE INDEX promotion_bundles_created ON promotion_bundles (pipeline, created_at, id);

CREATE TABLE promotion_records (
    pipeline   TEXT   NOT NULL,
    stage      TEXT   NOT NULL,
    bundle     TEXT   NOT NULL,
    version    BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    data       TEXT   NOT NULL,
    write_key  TEXT   NOT NULL,
    PRIMARY KEY (pipeline, stage, bundle)
);

CREATE TABLE promotion_pauses (
    pipeline  TEXT   NOT NULL,
    stage     TEXT   NOT NULL,
    paused_by TEXT   NOT NULL,
    reason    TEXT   NOT NULL,
    since     BIGINT NOT NULL,
    PRIMARY KEY (pipeline, stage)
);

-- +goose Down
DROP TABLE promotion_pauses;
DROP TABLE promotion_records;
DROP TABLE promotion_bundles;
