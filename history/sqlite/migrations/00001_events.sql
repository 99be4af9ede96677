-- +goose Up
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    instance   TEXT    NOT NULL,
    type       TEXT    NOT NULL,
    user       TEXT    NOT NULL DEFAULT '',
    message    TEXT    NOT NULL DEFAULT '',
    changes    TEXT    NOT NULL DEFAULT '[]', -- JSON array of history.Change
    commit_id  TEXT    NOT NULL DEFAULT '',
    error      TEXT    NOT NULL DEFAULT '',
    started_at INTEGER NOT NULL, -- Unix nanoseconds
    ended_at   INTEGER NOT NULL
);
CREATE INDEX events_instance_id ON events (instance, id DESC);

CREATE TABLE event_services (
    event_id INTEGER NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    instance TEXT    NOT NULL,
    service  TEXT    NOT NULL,
    PRIMARY KEY (event_id, service)
);
CREATE INDEX event_services_lookup ON event_services (instance, service, event_id DESC);

-- +goose Down
DROP TABLE event_services;
DROP TABLE events;
