package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/internal/sqlschema"
)

const insertTaskSQL = `
INSERT INTO mcp_tasks (` + sqlschema.TaskColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
	$11, $12, $13, $14, $15, $16, $17,
	$18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29,
	$30, $31, $32, $33, $34,
	$35, $36,
	$37, $38, $39, $40,
	$41, COALESCE($42::timestamptz, now()), now())
RETURNING ` + sqlschema.TaskColumns

const getTaskSQL = `SELECT ` + sqlschema.TaskColumns + ` FROM mcp_tasks WHERE id = $1`

const listTasksSQL = `
SELECT ` + sqlschema.TaskColumns + ` FROM mcp_tasks
WHERE user_id = $1 AND ($2::text = '' OR thread_id = $2::text)
ORDER BY created_at DESC, id DESC
LIMIT $3`

// claimTasksSQL: $1 owner, $2 lease in microseconds, $3 limit.
const claimTasksSQL = `
UPDATE mcp_tasks SET
	lease_owner = $1,
	lease_expires_at = now() + $2::bigint * interval '1 microsecond',
	poll_attempt_count = poll_attempt_count + CASE WHEN cancel_requested_at IS NULL THEN 1 ELSE 0 END,
	cancel_attempt_count = cancel_attempt_count + CASE WHEN cancel_requested_at IS NULL THEN 0 ELSE 1 END,
	updated_at = now()
WHERE id IN (
	SELECT id FROM mcp_tasks
	WHERE status IN ` + sqlschema.NonTerminal + `
		AND (lease_expires_at IS NULL OR lease_expires_at <= now())
		AND ((cancel_requested_at IS NULL AND next_poll_at <= now())
			OR (cancel_requested_at IS NOT NULL AND next_cancel_at <= now()))
	ORDER BY CASE WHEN cancel_requested_at IS NULL THEN next_poll_at ELSE next_cancel_at END, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED)
RETURNING ` + sqlschema.TaskColumns

const lockTaskUnderLeaseSQL = `
SELECT ` + sqlschema.TaskColumns + ` FROM mcp_tasks
WHERE id = $1 AND lease_owner = $2 AND lease_expires_at > now()
FOR UPDATE`

// updateTaskSQL writes the mutable columns ($3…$34, in mutableTaskArgs
// order) of a row locked by lockTaskUnderLeaseSQL.
const updateTaskSQL = `
UPDATE mcp_tasks SET
	status = $3, result = $4, result_preview = $5, result_truncated = $6, result_artifact = $7,
	error = $8, input_required = $9, driver_data = $10,
	notification_status = $11, event_fingerprint = $12, event_version = $13, notified_version = $14,
	dispatch_version = $15, dispatch_attempt = $16, dispatch_event = $17, notification_error = $18,
	notification_attempt_count = $19, next_notification_at = $20, notification_lease_owner = $21,
	notification_lease_expires_at = $22,
	next_poll_at = $23, last_polled_at = $24, last_poll_error = $25, poll_attempt_count = $26,
	consecutive_poll_error_count = $27,
	lease_owner = $28, lease_expires_at = $29,
	cancel_requested_at = $30, cancel_attempt_count = $31, next_cancel_at = $32, last_cancel_error = $33,
	completed_at = $34,
	updated_at = now()
WHERE id = $1 AND lease_owner = $2`

// requestCancelSQL: $1 id, $2 user, $3 thread.
const requestCancelSQL = `
UPDATE mcp_tasks SET
	cancel_requested_at = now(),
	next_cancel_at = COALESCE(next_cancel_at, now()),
	lease_owner = NULL,
	lease_expires_at = NULL,
	updated_at = now()
WHERE id = $1 AND user_id = $2 AND thread_id = $3
	AND status IN ` + sqlschema.NonTerminal + `
	AND cancel_requested_at IS NULL
RETURNING ` + sqlschema.TaskColumns

const getOwnedTaskSQL = `SELECT ` + sqlschema.TaskColumns + ` FROM mcp_tasks WHERE id = $1 AND user_id = $2 AND thread_id = $3`

type taskStore struct {
	pool *pgxpool.Pool
}

var _ store.TaskStore = (*taskStore)(nil)

func (s *taskStore) InsertTask(ctx context.Context, t *store.Task) error {
	t.ApplyDefaults()
	if err := t.Validate(); err != nil {
		return err
	}
	var createdAt *time.Time
	if !t.CreatedAt.IsZero() {
		createdAt = &t.CreatedAt
	}
	args := []any{t.ID, t.UserID, t.ThreadID, nullText(t.RunID), nullText(t.ToolCallID),
		t.ServerName, t.DriverName, t.RemoteTaskID, t.TaskName}
	args = append(args, mutableTaskArgs(t)...)
	args = append(args, createdAt)
	got, err := collectOne(s.pool.Query(ctx, insertTaskSQL, args...))
	if err != nil {
		return translate("insert task", err)
	}
	*t = got
	return nil
}

func (s *taskStore) GetTask(ctx context.Context, id string) (*store.Task, error) {
	t, err := collectOne(s.pool.Query(ctx, getTaskSQL, id))
	if err != nil {
		return nil, translate("get task", err)
	}
	return &t, nil
}

func (s *taskStore) ListTasks(ctx context.Context, p store.ListTasksParams) ([]store.Task, error) {
	if p.UserID == "" {
		return nil, fmt.Errorf("%w: list tasks: user id must not be empty", store.ErrInvalid)
	}
	limit := cmp.Or(p.Limit, store.DefaultListLimit)
	if limit < 0 {
		return nil, fmt.Errorf("%w: list tasks: limit must not be negative", store.ErrInvalid)
	}
	tasks, err := collectAll(s.pool.Query(ctx, listTasksSQL, p.UserID, p.ThreadID, limit))
	if err != nil {
		return nil, translate("list tasks", err)
	}
	return tasks, nil
}

func (s *taskStore) ClaimDueTasks(ctx context.Context, p store.ClaimParams) ([]store.Task, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	tasks, err := collectAll(s.pool.Query(ctx, claimTasksSQL, p.Owner, p.Lease.Microseconds(), p.Limit))
	if err != nil {
		return nil, translate("claim due tasks", err)
	}
	store.SortClaimed(tasks)
	return tasks, nil
}

func (s *taskStore) UpdateTaskUnderLease(ctx context.Context, id, owner string, update func(*store.Task)) error {
	return s.updateUnderLease(ctx, "update task", id, owner, lockTaskUnderLeaseSQL, updateTaskSQL,
		func(t *store.Task) []any { return mutableTaskArgs(t) }, update)
}

// updateUnderLease locks the row under a lease (lockSQL matches id and
// owner with a live lease, FOR UPDATE), applies update, validates the row
// and writes the columns args returns with updateSQL (parameters id, owner,
// args…), all in one transaction. A lease that is gone is
// store.ErrLeaseLost.
func (s *taskStore) updateUnderLease(ctx context.Context, what, id, owner, lockSQL, updateSQL string,
	args func(*store.Task) []any, update func(*store.Task)) error {
	if owner == "" {
		return fmt.Errorf("%w: %s: owner must not be empty", store.ErrInvalid, what)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := collectOne(tx.Query(ctx, lockSQL, id, owner))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		update(&t)
		if err := t.Validate(); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, updateSQL, append([]any{id, owner}, args(&t)...)...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return store.ErrLeaseLost
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrLeaseLost):
		return fmt.Errorf("store: postgres: %s %s as %s: %w", what, id, owner, store.ErrLeaseLost)
	case errors.Is(err, store.ErrInvalid):
		return err
	default:
		return translate(what, err)
	}
}

func (s *taskStore) RequestCancel(ctx context.Context, userID, threadID, taskID string) (*store.Task, error) {
	t, err := collectOne(s.pool.Query(ctx, requestCancelSQL, taskID, userID, threadID))
	if errors.Is(err, pgx.ErrNoRows) {
		// Terminal, already requested, or not this user's task in this thread.
		t, err = collectOne(s.pool.Query(ctx, getOwnedTaskSQL, taskID, userID, threadID))
	}
	if err != nil {
		return nil, translate("request cancel", err)
	}
	return &t, nil
}

// mutableTaskArgs returns the values of status … completed_at, the columns
// UpdateTaskUnderLease may change, in the order of updateTaskSQL.
func mutableTaskArgs(t *store.Task) []any {
	return []any{
		t.Status, nullJSON(t.Result), nullText(t.ResultPreview), t.ResultTruncated, nullJSON(t.ResultArtifact),
		nullText(t.Error), nullJSON(t.InputRequired), nullJSON(t.DriverData),
		t.NotificationStatus, nullText(t.EventFingerprint), t.EventVersion, t.NotifiedVersion,
		t.DispatchVersion, t.DispatchAttempt, nullJSON(t.DispatchEvent), nullText(t.NotificationError),
		t.NotificationAttemptCount, t.NextNotificationAt, nullText(t.NotificationLeaseOwner),
		t.NotificationLeaseExpiresAt,
		t.NextPollAt, t.LastPolledAt, nullText(t.LastPollError), t.PollAttemptCount,
		t.ConsecutivePollErrorCount,
		nullText(t.LeaseOwner), t.LeaseExpiresAt,
		t.CancelRequestedAt, t.CancelAttemptCount, t.NextCancelAt, nullText(t.LastCancelError),
		t.CompletedAt,
	}
}

// scanTask reads one row of sqlschema.TaskColumns.
func scanTask(row pgx.CollectableRow) (store.Task, error) {
	var (
		t                                                          store.Task
		runID, toolCallID, preview, errText, fingerprint, notifErr *string
		notifLeaseOwner, lastPollErr, leaseOwner, lastCancelErr    *string
		result, artifact, inputRequired, driverData, dispatchEvent []byte
	)
	err := row.Scan(
		&t.ID, &t.UserID, &t.ThreadID, &runID, &toolCallID, &t.ServerName, &t.DriverName,
		&t.RemoteTaskID, &t.TaskName, &t.Status,
		&result, &preview, &t.ResultTruncated, &artifact, &errText, &inputRequired, &driverData,
		&t.NotificationStatus, &fingerprint, &t.EventVersion, &t.NotifiedVersion, &t.DispatchVersion,
		&t.DispatchAttempt, &dispatchEvent, &notifErr, &t.NotificationAttemptCount,
		&t.NextNotificationAt, &notifLeaseOwner, &t.NotificationLeaseExpiresAt,
		&t.NextPollAt, &t.LastPolledAt, &lastPollErr, &t.PollAttemptCount, &t.ConsecutivePollErrorCount,
		&leaseOwner, &t.LeaseExpiresAt,
		&t.CancelRequestedAt, &t.CancelAttemptCount, &t.NextCancelAt, &lastCancelErr,
		&t.CompletedAt, &t.CreatedAt, &t.UpdatedAt,
	)
	if err != nil {
		return store.Task{}, err
	}
	t.RunID, t.ToolCallID = deref(runID), deref(toolCallID)
	t.ResultPreview, t.Error, t.EventFingerprint = deref(preview), deref(errText), deref(fingerprint)
	t.NotificationError, t.NotificationLeaseOwner = deref(notifErr), deref(notifLeaseOwner)
	t.LastPollError, t.LeaseOwner, t.LastCancelError = deref(lastPollErr), deref(leaseOwner), deref(lastCancelErr)
	t.Result, t.ResultArtifact, t.InputRequired = rawJSON(result), rawJSON(artifact), rawJSON(inputRequired)
	t.DriverData, t.DispatchEvent = rawJSON(driverData), rawJSON(dispatchEvent)
	for _, p := range []*time.Time{&t.CreatedAt, &t.UpdatedAt} {
		*p = p.UTC()
	}
	for _, p := range []**time.Time{
		&t.NextNotificationAt, &t.NotificationLeaseExpiresAt, &t.NextPollAt, &t.LastPolledAt,
		&t.LeaseExpiresAt, &t.CancelRequestedAt, &t.NextCancelAt, &t.CompletedAt,
	} {
		*p = utcPtr(*p)
	}
	return t, nil
}

func collectOne(rows pgx.Rows, err error) (store.Task, error) {
	if err != nil {
		return store.Task{}, err
	}
	return pgx.CollectExactlyOneRow(rows, scanTask)
}

func collectAll(rows pgx.Rows, err error) ([]store.Task, error) {
	if err != nil {
		return nil, err
	}
	tasks, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return nil, err
	}
	if tasks == nil {
		tasks = []store.Task{}
	}
	return tasks, nil
}

// nullText maps "" to NULL.
func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullJSON maps an empty document to NULL.
func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return []byte(raw)
}

func rawJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
