-- mcpbus initial schema (SQLite). Same tables and columns as ../postgres.
--
-- Type mapping: every timestamp is an INTEGER of Unix milliseconds (UTC),
-- written by the store and by the defaults below; JSON is TEXT; binary is
-- BLOB; booleans are INTEGER 0/1. Length limits that PostgreSQL enforces with
-- VARCHAR(n) are CHECK constraints here.

-- +goose Up

CREATE TABLE mcp_tasks (
    id                             TEXT    NOT NULL PRIMARY KEY, -- 'mcp-task-' + 32 hex
    user_id                        TEXT    NOT NULL,
    thread_id                      TEXT    NOT NULL,
    run_id                         TEXT,
    tool_call_id                   TEXT,
    server_name                    TEXT    NOT NULL CHECK (length(server_name) <= 128),
    driver_name                    TEXT    NOT NULL,
    remote_task_id                 TEXT    NOT NULL CHECK (length(remote_task_id) <= 255), -- never exposed
    task_name                      TEXT    NOT NULL CHECK (length(task_name) <= 255),
    status                         TEXT    NOT NULL DEFAULT 'submitted',

    result                         TEXT,
    result_preview                 TEXT,
    result_truncated               INTEGER NOT NULL DEFAULT 0,
    result_artifact                TEXT,
    error                          TEXT,
    input_required                 TEXT,
    driver_data                    TEXT,

    -- notification outbox
    notification_status            TEXT    NOT NULL DEFAULT 'none',
    event_fingerprint              TEXT,
    event_version                  INTEGER NOT NULL DEFAULT 0,
    notified_version               INTEGER NOT NULL DEFAULT 0,
    dispatch_version               INTEGER NOT NULL DEFAULT 0,
    dispatch_attempt               INTEGER NOT NULL DEFAULT 0,
    dispatch_event                 TEXT,
    notification_error             TEXT,
    notification_attempt_count     INTEGER NOT NULL DEFAULT 0,
    next_notification_at           INTEGER,
    notification_lease_owner       TEXT,
    notification_lease_expires_at  INTEGER,

    -- polling
    next_poll_at                   INTEGER,
    last_polled_at                 INTEGER,
    last_poll_error                TEXT,
    poll_attempt_count             INTEGER NOT NULL DEFAULT 0,
    consecutive_poll_error_count   INTEGER NOT NULL DEFAULT 0,

    -- one lease shared by poll and cancel claims
    lease_owner                    TEXT,
    lease_expires_at               INTEGER,

    -- cancellation
    cancel_requested_at            INTEGER,
    cancel_attempt_count           INTEGER NOT NULL DEFAULT 0,
    next_cancel_at                 INTEGER,
    last_cancel_error              TEXT,

    completed_at                   INTEGER,
    created_at                     INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at                     INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),

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

CREATE TABLE mcp_oauth_tokens (
    connection_key      TEXT    NOT NULL PRIMARY KEY,
    owner_user_id       TEXT,
    fingerprint         CHAR(64),
    request_shape_hash  TEXT,
    access_token_enc    BLOB,
    refresh_token_enc   BLOB,
    token_type          TEXT,
    expires_at          INTEGER,
    lease_owner         TEXT,
    lease_expires_at    INTEGER,
    updated_at          INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
);

CREATE INDEX ix_mcp_oauth_tokens_owner_user_id ON mcp_oauth_tokens (owner_user_id);

CREATE TABLE mcp_personal_connections (
    user_id       TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    runtime_name  TEXT    NOT NULL,
    definition    TEXT    NOT NULL,
    created_at    INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at    INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    PRIMARY KEY (user_id, name)
);

-- +goose Down
DROP TABLE mcp_personal_connections;
DROP TABLE mcp_oauth_tokens;
DROP TABLE mcp_tasks;
