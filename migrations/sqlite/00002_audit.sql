-- The audit log in the database (audit.database: true); same table and
-- columns as ../postgres (times are INTEGER Unix milliseconds, booleans
-- INTEGER 0/1). No column ever holds a secret.

-- +goose Up

CREATE TABLE mcp_audit (
    id                   INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    recorded_at          INTEGER NOT NULL,
    kind                 TEXT    NOT NULL, -- call, config
    user_id              TEXT,
    thread_id            TEXT,
    tool                 TEXT,
    server_name          TEXT,
    transport            TEXT,
    outcome              TEXT,
    duration_ms          REAL    NOT NULL DEFAULT 0,
    result_bytes         INTEGER NOT NULL DEFAULT 0,
    request_id           TEXT,
    trace_id             TEXT,
    action               TEXT,
    arguments            TEXT,             -- JSON, masked and capped
    arguments_truncated  INTEGER NOT NULL DEFAULT 0,
    changes              TEXT,             -- JSON: [{server, op, keys}]
    CONSTRAINT ck_mcp_audit_kind CHECK (kind IN ('call', 'config'))
);

CREATE INDEX ix_mcp_audit_recorded_at ON mcp_audit (recorded_at);
CREATE INDEX ix_mcp_audit_user_recorded_at ON mcp_audit (user_id, recorded_at);
CREATE INDEX ix_mcp_audit_tool_recorded_at ON mcp_audit (tool, recorded_at);

-- +goose Down
DROP TABLE mcp_audit;
