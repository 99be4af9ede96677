-- +goose Up
-- Image signature verification results, per repository, digest and
-- profile fingerprint, shared by the replicas: a final (verified) one
-- stays; another is checked again after a short while (verify.Cached).
CREATE TABLE verification_results (
    repository TEXT    NOT NULL,
    digest     TEXT    NOT NULL,
    profile    TEXT    NOT NULL,
    outcome    TEXT    NOT NULL,
    final      INTEGER NOT NULL,
    signer     TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    detail     TEXT    NOT NULL,
    checked_at INTEGER NOT NULL,
    PRIMARY KEY (repository, digest, profile)
);

-- +goose Down
DROP TABLE verification_results;
