-- A task belongs to the deployment that submitted it: its nats.namespace
-- ('' without one). Deployments in different namespaces may share one
-- database; each claims, lists and counts only its own tasks. Rows from
-- before this column belong to the deployment without a namespace.

-- +goose Up

ALTER TABLE mcp_tasks ADD COLUMN namespace TEXT NOT NULL DEFAULT '';
CREATE INDEX ix_mcp_tasks_namespace_status ON mcp_tasks (namespace, status);

-- +goose Down
DROP INDEX ix_mcp_tasks_namespace_status;
ALTER TABLE mcp_tasks DROP COLUMN namespace;
