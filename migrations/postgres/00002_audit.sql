-- The audit log in the database (audit.database: true), beside the JetStream
-- stream: one row per tool call and per config change through the API, for SQL
-- queries and retention beyond the stream's. No column ever holds a secret:
-- arguments (only with audit.capture_arguments) are masked before they are
-- written, and changes name keys, never values. The SQLite twin is in ../sqlite.

-- +goose Up

CREATE TABLE mcp_audit (
    id                   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recorded_at          TIMESTAMPTZ      NOT NULL,
    kind                 TEXT             NOT NULL, -- call, config
    user_id              TEXT,
    thread_id            TEXT,
    tool                 TEXT,
    server_name          TEXT,
    transport            TEXT,
    outcome              TEXT,
    duration_ms          DOUBLE PRECISION NOT NULL DEFAULT 0,
    result_bytes         BIGINT           NOT NULL DEFAULT 0,
    request_id           TEXT,
    trace_id             TEXT,
    action               TEXT,
    arguments            TEXT,            -- JSON, masked and capped
    arguments_truncated  BOOLEAN          NOT NULL DEFAULT FALSE,
    changes              TEXT,            -- JSON: [{server, op, keys}]
    CONSTRAINT ck_mcp_audit_kind CHECK (kind IN ('call', 'config'))
);

CREATE INDEX ix_mcp_audit_recorded_at ON mcp_audit (recorded_at);
CREATE INDEX ix_mcp_audit_user_recorded_at ON mcp_audit (user_id, recorded_at);
CREATE INDEX ix_mcp_audit_tool_recorded_at ON mcp_audit (tool, recorded_at);

-- +goose Down
DROP TABLE mcp_audit;
