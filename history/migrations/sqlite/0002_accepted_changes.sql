-- reckon history schema, version 2 (SQLite; the PostgreSQL twin is ../postgres/0002_accepted_changes.sql).
-- A change a person accepted (reckon history accept): from this run time on, the series' nightly
-- detector takes the new level as its reference. Empty series fields match every value.
CREATE TABLE accepted_changes (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    testbed_key TEXT    NOT NULL,
    spec_name   TEXT    NOT NULL,
    config      TEXT    NOT NULL,
    workload    TEXT    NOT NULL,
    metric      TEXT    NOT NULL,
    from_us     BIGINT  NOT NULL,
    git_commit  TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    added_us    BIGINT  NOT NULL
);
CREATE INDEX accepted_changes_series ON accepted_changes (testbed_key, spec_name);
