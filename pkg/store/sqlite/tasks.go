package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/internal/sqlschema"
)

// nowMS is SQLite's clock in Unix milliseconds; within one statement every
// use returns the same value.
const nowMS = `CAST(unixepoch('subsec') * 1000 AS INTEGER)`

const insertTaskSQL = `
INSERT INTO mcp_tasks (` + sqlschema.TaskColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
	$11, $12, $13, $14, $15, $16, $17,
	$18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29,
	$30, $31, $32, $33, $34,
	$35, $36,
	$37, $38, $39, $40,
	$41, COALESCE($42, ` + nowMS + `), ` + nowMS + `)
RETURNING ` + sqlschema.TaskColumns

const getTaskSQL = `SELECT ` + sqlschema.TaskColumns + ` FROM mcp_tasks WHERE id = $1`

const listTasksSQL = `
SELECT ` + sqlschema.TaskColumns + ` FROM mcp_tasks
WHERE user_id = $1 AND ($2 = '' OR thread_id = $2)
ORDER BY created_at DESC, id DESC
LIMIT $3`

// claimTasksSQL: $1 owner, $2 lease in milliseconds, $3 limit. The single
// connection makes the sub-select and the update one atomic step.
const claimTasksSQL = `
UPDATE mcp_tasks SET
	lease_owner = $1,
	lease_expires_at = ` + nowMS + ` + $2,
	poll_attempt_count = poll_attempt_count + CASE WHEN cancel_requested_at IS NULL THEN 1 ELSE 0 END,
	cancel_attempt_count = cancel_attempt_count + CASE WHEN cancel_requested_at IS NULL THEN 0 ELSE 1 END,
	updated_at = ` + nowMS + `
WHERE id IN (
	SELECT id FROM mcp_tasks
	WHERE status IN ` + sqlschema.NonTerminal + `
		AND (lease_expires_at IS NULL OR lease_expires_at <= ` + nowMS + `)
		AND ((cancel_requested_at IS NULL AND next_poll_at <= ` + nowMS + `)
			OR (cancel_requested_at IS NOT NULL AND next_cancel_at <= ` + nowMS + `))
	ORDER BY CASE WHEN cancel_requested_at IS NULL THEN next_poll_at ELSE next_cancel_at END, id
	LIMIT $3)
RETURNING ` + sqlschema.TaskColumns

const selectTaskUnderLeaseSQL = `
SELECT ` + sqlschema.TaskColumns + ` FROM mcp_tasks
WHERE id = $1 AND lease_owner = $2 AND lease_expires_at > ` + nowMS

// updateTaskSQL writes the mutable columns ($3…$34, in mutableTaskArgs
// order) of a row read by selectTaskUnderLeaseSQL in the same transaction.
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
	updated_at = ` + nowMS + `
WHERE id = $1 AND lease_owner = $2`

// requestCancelSQL: $1 id, $2 user, $3 thread.
const requestCancelSQL = `
UPDATE mcp_tasks SET
	cancel_requested_at = ` + nowMS + `,
	next_cancel_at = COALESCE(next_cancel_at, ` + nowMS + `),
	lease_owner = NULL,
	lease_expires_at = NULL,
	updated_at = ` + nowMS + `
WHERE id = $1 AND user_id = $2 AND thread_id = $3
	AND status IN ` + sqlschema.NonTerminal + `
	AND cancel_requested_at IS NULL
RETURNING ` + sqlschema.TaskColumns

const getOwnedTaskSQL = `SELECT ` + sqlschema.TaskColumns + ` FROM mcp_tasks WHERE id = $1 AND user_id = $2 AND thread_id = $3`

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type taskStore struct {
	db *sql.DB
}

var _ store.TaskStore = (*taskStore)(nil)

func (s *taskStore) InsertTask(ctx context.Context, t *store.Task) error {
	t.ApplyDefaults()
	if err := t.Validate(); err != nil {
		return err
	}
	var createdAt any
	if !t.CreatedAt.IsZero() {
		createdAt = t.CreatedAt.UnixMilli()
	}
	args := []any{t.ID, t.UserID, t.ThreadID, nullText(t.RunID), nullText(t.ToolCallID),
		t.ServerName, t.DriverName, t.RemoteTaskID, t.TaskName}
	args = append(args, mutableTaskArgs(t)...)
	args = append(args, createdAt)
	got, err := queryOneTask(ctx, s.db, insertTaskSQL, args...)
	if err != nil {
		return translate("insert task", err)
	}
	*t = got
	return nil
}

func (s *taskStore) GetTask(ctx context.Context, id string) (*store.Task, error) {
	t, err := queryOneTask(ctx, s.db, getTaskSQL, id)
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
	tasks, err := queryTasks(ctx, s.db, listTasksSQL, p.UserID, p.ThreadID, limit)
	if err != nil {
		return nil, translate("list tasks", err)
	}
	return tasks, nil
}

func (s *taskStore) ClaimDueTasks(ctx context.Context, p store.ClaimParams) ([]store.Task, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	tasks, err := queryTasks(ctx, s.db, claimTasksSQL, p.Owner, p.Lease.Milliseconds(), p.Limit)
	if err != nil {
		return nil, translate("claim due tasks", err)
	}
	store.SortClaimed(tasks)
	return tasks, nil
}

func (s *taskStore) UpdateTaskUnderLease(ctx context.Context, id, owner string, update func(*store.Task)) error {
	return s.updateUnderLease(ctx, "update task", id, owner, selectTaskUnderLeaseSQL, updateTaskSQL,
		func(t *store.Task) []any { return mutableTaskArgs(t) }, update)
}

// updateUnderLease reads the row under a lease (selectSQL matches id and
// owner with a live lease), applies update, validates the row and writes
// the columns args returns with updateSQL (parameters id, owner, args…),
// all in one transaction. A lease that is gone is store.ErrLeaseLost.
func (s *taskStore) updateUnderLease(ctx context.Context, what, id, owner, selectSQL, updateSQL string,
	args func(*store.Task) []any, update func(*store.Task)) error {
	if owner == "" {
		return fmt.Errorf("%w: %s: owner must not be empty", store.ErrInvalid, what)
	}
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		t, err := queryOneTask(ctx, tx, selectSQL, id, owner)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		update(&t)
		if err := t.Validate(); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, updateSQL, append([]any{id, owner}, args(&t)...)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return cmp.Or(err, store.ErrLeaseLost)
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrLeaseLost):
		return fmt.Errorf("store: sqlite: %s %s as %s: %w", what, id, owner, store.ErrLeaseLost)
	case errors.Is(err, store.ErrInvalid):
		return err
	default:
		return translate(what, err)
	}
}

func (s *taskStore) RequestCancel(ctx context.Context, userID, threadID, taskID string) (*store.Task, error) {
	t, err := queryOneTask(ctx, s.db, requestCancelSQL, taskID, userID, threadID)
	if errors.Is(err, sql.ErrNoRows) {
		// Terminal, already requested, or not this user's task in this thread.
		t, err = queryOneTask(ctx, s.db, getOwnedTaskSQL, taskID, userID, threadID)
	}
	if err != nil {
		return nil, translate("request cancel", err)
	}
	return &t, nil
}

// inTx runs fn in a transaction (BEGIN IMMEDIATE through the DSN) and
// commits when it returns nil.
func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// mutableTaskArgs returns the values of status … completed_at, the columns
// UpdateTaskUnderLease may change, in the order of updateTaskSQL.
func mutableTaskArgs(t *store.Task) []any {
	return []any{
		t.Status, nullText(string(t.Result)), nullText(t.ResultPreview), t.ResultTruncated,
		nullText(string(t.ResultArtifact)),
		nullText(t.Error), nullText(string(t.InputRequired)), nullText(string(t.DriverData)),
		t.NotificationStatus, nullText(t.EventFingerprint), t.EventVersion, t.NotifiedVersion,
		t.DispatchVersion, t.DispatchAttempt, nullText(string(t.DispatchEvent)), nullText(t.NotificationError),
		t.NotificationAttemptCount, millis(t.NextNotificationAt), nullText(t.NotificationLeaseOwner),
		millis(t.NotificationLeaseExpiresAt),
		millis(t.NextPollAt), millis(t.LastPolledAt), nullText(t.LastPollError), t.PollAttemptCount,
		t.ConsecutivePollErrorCount,
		nullText(t.LeaseOwner), millis(t.LeaseExpiresAt),
		millis(t.CancelRequestedAt), t.CancelAttemptCount, millis(t.NextCancelAt), nullText(t.LastCancelError),
		millis(t.CompletedAt),
	}
}

type rowScanner interface {
	Scan(dest ...any) error
}

// scanTask reads one row of sqlschema.TaskColumns.
func scanTask(row rowScanner) (store.Task, error) {
	var (
		t                                                          store.Task
		runID, toolCallID, preview, errText, fingerprint, notifErr sql.NullString
		notifLeaseOwner, lastPollErr, leaseOwner, lastCancelErr    sql.NullString
		result, artifact, inputRequired, driverData, dispatchEvent sql.NullString
		nextNotif, notifLease, nextPoll, lastPolled, leaseExp      sql.NullInt64
		cancelReq, nextCancel, completed                           sql.NullInt64
		created, updated                                           int64
	)
	err := row.Scan(
		&t.ID, &t.UserID, &t.ThreadID, &runID, &toolCallID, &t.ServerName, &t.DriverName,
		&t.RemoteTaskID, &t.TaskName, &t.Status,
		&result, &preview, &t.ResultTruncated, &artifact, &errText, &inputRequired, &driverData,
		&t.NotificationStatus, &fingerprint, &t.EventVersion, &t.NotifiedVersion, &t.DispatchVersion,
		&t.DispatchAttempt, &dispatchEvent, &notifErr, &t.NotificationAttemptCount,
		&nextNotif, &notifLeaseOwner, &notifLease,
		&nextPoll, &lastPolled, &lastPollErr, &t.PollAttemptCount, &t.ConsecutivePollErrorCount,
		&leaseOwner, &leaseExp,
		&cancelReq, &t.CancelAttemptCount, &nextCancel, &lastCancelErr,
		&completed, &created, &updated,
	)
	if err != nil {
		return store.Task{}, err
	}
	t.RunID, t.ToolCallID = runID.String, toolCallID.String
	t.ResultPreview, t.Error, t.EventFingerprint = preview.String, errText.String, fingerprint.String
	t.NotificationError, t.NotificationLeaseOwner = notifErr.String, notifLeaseOwner.String
	t.LastPollError, t.LeaseOwner, t.LastCancelError = lastPollErr.String, leaseOwner.String, lastCancelErr.String
	t.Result, t.ResultArtifact, t.InputRequired = rawJSON(result), rawJSON(artifact), rawJSON(inputRequired)
	t.DriverData, t.DispatchEvent = rawJSON(driverData), rawJSON(dispatchEvent)
	t.NextNotificationAt, t.NotificationLeaseExpiresAt = timePtr(nextNotif), timePtr(notifLease)
	t.NextPollAt, t.LastPolledAt, t.LeaseExpiresAt = timePtr(nextPoll), timePtr(lastPolled), timePtr(leaseExp)
	t.CancelRequestedAt, t.NextCancelAt, t.CompletedAt = timePtr(cancelReq), timePtr(nextCancel), timePtr(completed)
	t.CreatedAt, t.UpdatedAt = fromMillis(created), fromMillis(updated)
	return t, nil
}

func queryTasks(ctx context.Context, q querier, query string, args ...any) ([]store.Task, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	tasks := []store.Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	return tasks, rows.Err()
}

// queryOneTask runs a query (or a statement with RETURNING) expected to
// yield at most one row; no row is sql.ErrNoRows. It reads every row, so a
// RETURNING statement always completes.
func queryOneTask(ctx context.Context, q querier, query string, args ...any) (store.Task, error) {
	tasks, err := queryTasks(ctx, q, query, args...)
	if err != nil {
		return store.Task{}, err
	}
	if len(tasks) == 0 {
		return store.Task{}, sql.ErrNoRows
	}
	return tasks[0], nil
}
