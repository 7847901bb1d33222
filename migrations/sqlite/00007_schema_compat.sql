-- The schema version rule (docs/operations.md): a mcpbus release refuses to
-- start against a schema newer than the newest migration it embeds, unless
-- every newer migration declared itself compatible with it here. An
-- expand-only migration (new tables, new columns with defaults or NULL,
-- new indexes) that the previous release runs on unchanged ends its Up
-- with a row of its own version and the oldest schema version whose
-- releases may run on it:
--   INSERT INTO mcpbus_schema_compat (version, compatible_from) VALUES (8, 7);
-- A contract migration (dropping or renaming what a release uses) adds no
-- row, so releases that do not know it refuse to start against it.

-- +goose Up
CREATE TABLE mcpbus_schema_compat (
    version         BIGINT NOT NULL PRIMARY KEY,
    compatible_from BIGINT NOT NULL
);

-- +goose Down
DROP TABLE mcpbus_schema_compat;
