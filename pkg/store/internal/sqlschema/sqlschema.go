// Package sqlschema holds the SQL the postgres and sqlite stores share
// word for word: the column lists of the mcpbus tables (in the order each
// store's scan function reads them) and the status list of unfinished
// tasks. The statements themselves differ per dialect and stay with their
// store.
package sqlschema

// TaskColumns is every column of mcp_tasks.
const TaskColumns = `id, user_id, thread_id, run_id, tool_call_id, server_name, driver_name,
	remote_task_id, task_name, status,
	result, result_preview, result_truncated, result_artifact, error, input_required, driver_data,
	notification_status, event_fingerprint, event_version, notified_version, dispatch_version,
	dispatch_attempt, dispatch_event, notification_error, notification_attempt_count,
	next_notification_at, notification_lease_owner, notification_lease_expires_at,
	next_poll_at, last_polled_at, last_poll_error, poll_attempt_count, consecutive_poll_error_count,
	lease_owner, lease_expires_at,
	cancel_requested_at, cancel_attempt_count, next_cancel_at, last_cancel_error,
	completed_at, created_at, updated_at`

// NonTerminal is the SQL list of the task statuses that still change.
const NonTerminal = `('submitted', 'working', 'input_required')`

// TokenColumns is every column of mcp_oauth_tokens.
const TokenColumns = `connection_key, owner_user_id, fingerprint, request_shape_hash,
	access_token_enc, refresh_token_enc, token_type, expires_at,
	lease_owner, lease_expires_at, updated_at`

// ConnectionColumns is every column of mcp_personal_connections.
const ConnectionColumns = `user_id, name, runtime_name, definition, created_at, updated_at`
