-- Tool pinning (the "rug pull" guard). mcp_tool_definitions keeps every
-- definition discovery has seen for a (server identity, tool name), keyed by
-- its digest (SHA-256 of the canonical JSON of name, description, input and
-- output schema and annotations), with the first and last catalog generation
-- it was seen in. mcp_tool_pins holds one row per (server identity, tool
-- name): the approved digest, a pending change waiting for an admin, its
-- flags, and who decided it. The server identity is the server's name (a
-- personal connection's runtime name, owner set). No column holds a secret:
-- a definition is what the upstream lists to every caller. The SQLite twin is
-- in ../sqlite.

-- +goose Up

CREATE TABLE mcp_tool_definitions (
    server_id         TEXT        NOT NULL,
    tool_name         TEXT        NOT NULL,
    digest            TEXT        NOT NULL,
    definition        TEXT        NOT NULL, -- canonical JSON
    first_generation  BIGINT      NOT NULL,
    last_generation   BIGINT      NOT NULL,
    first_seen_at     TIMESTAMPTZ NOT NULL,
    last_seen_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (server_id, tool_name, digest)
);

CREATE TABLE mcp_tool_pins (
    server_id        TEXT        NOT NULL,
    tool_name        TEXT        NOT NULL,
    owner            TEXT        NOT NULL DEFAULT '',
    policy           TEXT        NOT NULL,
    state            TEXT        NOT NULL, -- approved, pending, blocked, rejected, removed
    approved_digest  TEXT,
    pending_digest   TEXT,
    flags            TEXT,                 -- JSON: the pending change's flags
    generation       BIGINT      NOT NULL DEFAULT 0,
    decided_by       TEXT,
    decided_at       TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (server_id, tool_name),
    CONSTRAINT ck_mcp_tool_pins_state CHECK (state IN ('approved', 'pending', 'blocked', 'rejected', 'removed'))
);

CREATE INDEX ix_mcp_tool_pins_state ON mcp_tool_pins (state, updated_at);

-- +goose Down
DROP TABLE mcp_tool_pins;
DROP TABLE mcp_tool_definitions;
