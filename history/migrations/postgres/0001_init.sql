-- reckon history schema, version 1 (PostgreSQL). The SQLite twin is ../sqlite/0001_init.sql:
-- the same tables, columns and keys; only the id column's type differs.
CREATE TABLE runs (
    id             BIGSERIAL PRIMARY KEY,
    uid            TEXT    NOT NULL UNIQUE,
    started_us     BIGINT  NOT NULL,
    finished_us    BIGINT  NOT NULL,
    added_us       BIGINT  NOT NULL,
    source         TEXT    NOT NULL,
    git_commit     TEXT    NOT NULL,
    engine         TEXT    NOT NULL,
    engine_version TEXT    NOT NULL,
    reckon_version TEXT    NOT NULL,
    testbed_key    TEXT    NOT NULL,
    testbed_json   TEXT    NOT NULL,
    spec_name      TEXT    NOT NULL,
    spec_hash      TEXT    NOT NULL,
    label_filter   TEXT    NOT NULL,
    verdict        TEXT    NOT NULL
);
CREATE INDEX runs_series ON runs (testbed_key, spec_name, started_us);
CREATE INDEX runs_commit ON runs (git_commit);

CREATE TABLE configs (
    run_id         BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    config         TEXT   NOT NULL,
    engine_version TEXT   NOT NULL,
    launch_error   TEXT   NOT NULL,
    engine_json    TEXT   NOT NULL,
    PRIMARY KEY (run_id, config)
);

-- Numeric EngineReport values (kv_cache_tokens, kv_cache_gib, ...): one series each.
CREATE TABLE engine_values (
    run_id BIGINT           NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    config TEXT             NOT NULL,
    key    TEXT             NOT NULL,
    value  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, config, key)
);

-- Every trial's every metric: nothing is averaged away.
CREATE TABLE trials (
    run_id      BIGINT           NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    config      TEXT             NOT NULL,
    workload    TEXT             NOT NULL,
    trial_index INTEGER          NOT NULL,
    metric      TEXT             NOT NULL,
    value       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, config, workload, trial_index, metric)
);
CREATE INDEX trials_series ON trials (config, workload, metric);
