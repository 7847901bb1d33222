-- mcpbus initial schema (PostgreSQL). The SQLite twin in ../sqlite has the same
-- tables and columns; only the types differ (TIMESTAMPTZ here, INTEGER unix
-- milliseconds there; JSONB here, TEXT there; BYTEA here, BLOB there).

-- +goose Up

-- Durable MCP tasks: one row per remote task, with the poll/cancel lease and
-- the notification outbox on the row (reference §4.1).
CREATE TABLE mcp_tasks (
    id                             TEXT         NOT NULL PRIMARY KEY, -- 'mcp-task-' + 32 hex
    user_id                        TEXT         NOT NULL,
    thread_id                      TEXT         NOT NULL,
    run_id                         TEXT,
    tool_call_id                   TEXT,
    server_name                    VARCHAR(128) NOT NULL,
    driver_name                    TEXT         NOT NULL,
    remote_task_id                 VARCHAR(255) NOT NULL,            -- never exposed by any API
    task_name                      VARCHAR(255) NOT NULL,
    status                         TEXT         NOT NULL DEFAULT 'submitted',

    result                         JSONB,
    result_preview                 TEXT,
    result_truncated               BOOLEAN      NOT NULL DEFAULT FALSE,
    result_artifact                JSONB,
    error                          TEXT,
    input_required                 JSONB,
    driver_data                    JSONB,

    -- notification outbox
    notification_status            TEXT         NOT NULL DEFAULT 'none',
    event_fingerprint              TEXT,
    event_version                  INTEGER      NOT NULL DEFAULT 0,
    notified_version               INTEGER      NOT NULL DEFAULT 0,
    dispatch_version               INTEGER      NOT NULL DEFAULT 0,
    dispatch_attempt               INTEGER      NOT NULL DEFAULT 0,
    dispatch_event                 JSONB,
    notification_error             TEXT,
    notification_attempt_count     INTEGER      NOT NULL DEFAULT 0,
    next_notification_at           TIMESTAMPTZ,
    notification_lease_owner       TEXT,
    notification_lease_expires_at  TIMESTAMPTZ,

    -- polling
    next_poll_at                   TIMESTAMPTZ,
    last_polled_at                 TIMESTAMPTZ,
    last_poll_error                TEXT,
    poll_attempt_count             INTEGER      NOT NULL DEFAULT 0,
    consecutive_poll_error_count   INTEGER      NOT NULL DEFAULT 0,

    -- one lease shared by poll and cancel claims
    lease_owner                    TEXT,
    lease_expires_at               TIMESTAMPTZ,

    -- cancellation
    cancel_requested_at            TIMESTAMPTZ,
    cancel_attempt_count           INTEGER      NOT NULL DEFAULT 0,
    next_cancel_at                 TIMESTAMPTZ,
    last_cancel_error              TEXT,

    completed_at                   TIMESTAMPTZ,
    created_at                     TIMESTAMPTZ  NOT NULL DEFAULT now(),
    updated_at                     TIMESTAMPTZ  NOT NULL DEFAULT now(),

    CONSTRAINT uq_mcp_tasks_user_server_remote UNIQUE (user_id, server_name, remote_task_id),
    CONSTRAINT ck_mcp_tasks_status CHECK (status IN
        ('submitted', 'working', 'input_required', 'completed', 'failed', 'cancelled')),
    CONSTRAINT ck_mcp_tasks_notification_status CHECK (notification_status IN
        ('none', 'pending', 'claimed', 'dispatched', 'retry', 'delivered', 'dead_letter'))
);

CREATE INDEX ix_mcp_tasks_user_id ON mcp_tasks (user_id);
CREATE INDEX ix_mcp_tasks_thread_id ON mcp_tasks (thread_id);
CREATE INDEX ix_mcp_tasks_status ON mcp_tasks (status);
CREATE INDEX ix_mcp_tasks_thread_created ON mcp_tasks (thread_id, created_at);
CREATE INDEX ix_mcp_tasks_status_next_poll ON mcp_tasks (status, next_poll_at);
CREATE INDEX ix_mcp_tasks_notification_due ON mcp_tasks (notification_status, next_notification_at);
CREATE INDEX ix_mcp_tasks_cancel_due ON mcp_tasks (cancel_requested_at, next_cancel_at);

-- OAuth refresh-token chains shared by replicas (reference §5.1): tokens are
-- AES-256-GCM ciphertext; the lease serialises refreshes across replicas.
CREATE TABLE mcp_oauth_tokens (
    connection_key      TEXT        NOT NULL PRIMARY KEY,
    owner_user_id       TEXT,
    fingerprint         CHAR(64),
    request_shape_hash  TEXT,
    access_token_enc    BYTEA,
    refresh_token_enc   BYTEA,
    token_type          TEXT,
    expires_at          TIMESTAMPTZ,
    lease_owner         TEXT,
    lease_expires_at    TIMESTAMPTZ,
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX ix_mcp_oauth_tokens_owner_user_id ON mcp_oauth_tokens (owner_user_id);

-- Per-user MCP server definitions.
CREATE TABLE mcp_personal_connections (
    user_id       TEXT        NOT NULL,
    name          TEXT        NOT NULL,
    runtime_name  TEXT        NOT NULL,
    definition    JSONB       NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, name)
);

-- +goose Down
DROP TABLE mcp_personal_connections;
DROP TABLE mcp_oauth_tokens;
DROP TABLE mcp_tasks;
