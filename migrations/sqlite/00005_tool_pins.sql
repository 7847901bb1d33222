-- Tool pinning; same tables and columns as ../postgres (times are INTEGER
-- Unix milliseconds).

-- +goose Up

CREATE TABLE mcp_tool_definitions (
    server_id         TEXT    NOT NULL,
    tool_name         TEXT    NOT NULL,
    digest            TEXT    NOT NULL,
    definition        TEXT    NOT NULL,
    first_generation  INTEGER NOT NULL,
    last_generation   INTEGER NOT NULL,
    first_seen_at     INTEGER NOT NULL,
    last_seen_at      INTEGER NOT NULL,
    PRIMARY KEY (server_id, tool_name, digest)
);

CREATE TABLE mcp_tool_pins (
    server_id        TEXT    NOT NULL,
    tool_name        TEXT    NOT NULL,
    owner            TEXT    NOT NULL DEFAULT '',
    policy           TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    approved_digest  TEXT,
    pending_digest   TEXT,
    flags            TEXT,
    generation       INTEGER NOT NULL DEFAULT 0,
    decided_by       TEXT,
    decided_at       INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (server_id, tool_name),
    CONSTRAINT ck_mcp_tool_pins_state CHECK (state IN ('approved', 'pending', 'blocked', 'rejected', 'removed'))
);

CREATE INDEX ix_mcp_tool_pins_state ON mcp_tool_pins (state, updated_at);

-- +goose Down
DROP TABLE mcp_tool_pins;
DROP TABLE mcp_tool_definitions;
