-- A tool call through a virtual server: which one, and the access policy's
-- decision on it ('allowed', or the policy that refused it: a key's or NATS
-- identity's binding, the set itself, one of its quotas). Empty for calls on
-- the whole catalog and for config records. The twin is in the other dialect's folder.

-- +goose Up

ALTER TABLE mcp_audit ADD COLUMN virtual_server TEXT;
ALTER TABLE mcp_audit ADD COLUMN policy TEXT;

-- +goose Down
ALTER TABLE mcp_audit DROP COLUMN policy;
ALTER TABLE mcp_audit DROP COLUMN virtual_server;
