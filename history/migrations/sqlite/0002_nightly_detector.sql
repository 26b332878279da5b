-- reckon history schema, version 2 (SQLite; the PostgreSQL twin is ../postgres/0002_nightly_detector.sql).
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

-- The launch of the engine each trial ran in (gate.Trial.Launch; 0 for runs stored before, and
-- for one-launch runs): launches, not runs, are the unit of the between-launch variation.
ALTER TABLE trials ADD COLUMN launch INTEGER NOT NULL DEFAULT 0;
