package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// taskStatements are the mcp_tasks statements of one dialect.
type taskStatements struct {
	insert, get, getOwned, list                  string
	claimPolls, claimCancels, claimNotifications string
	requestCancel                                string
	lockUnderLease, updateUnderLease             string
	lockUnderNotification, updateNotification    string
	countByStatus, countPendingNotifications     string
}

// The claims: $1 now, $2 lease, $3 owner, $4 limit, $5 namespace.
const (
	// claimTasksSQL is the poll and the cancel claim: {pending} selects rows
	// with or without a cancel request, {due} is their due time and
	// {attempts} the counter the claim adds one to.
	claimTasksSQL = `
UPDATE mcp_tasks SET
	lease_owner = $3,
	lease_expires_at = {now} + {lease},
	{attempts} = {attempts} + 1,
	updated_at = {now}
WHERE id IN (
	SELECT id FROM mcp_tasks
	WHERE namespace = $5
		AND status IN {non_terminal}
		AND cancel_requested_at {pending}
		AND {due} <= {now}
		AND (lease_expires_at IS NULL OR lease_expires_at <= {now})
	ORDER BY {due}, id
	LIMIT $4
	{claim_lock})
RETURNING {columns}`

	claimNotificationsSQL = `
UPDATE mcp_tasks SET
	notification_lease_owner = $3,
	notification_lease_expires_at = {now} + {lease}
WHERE id IN (
	SELECT id FROM mcp_tasks
	WHERE namespace = $5
		AND notification_status IN {due_notification}
		AND next_notification_at <= {now}
		AND event_version > notified_version
		AND (notification_lease_expires_at IS NULL OR notification_lease_expires_at <= {now})
	ORDER BY next_notification_at, id
	LIMIT $4
	{claim_lock})
RETURNING {columns}`

	// requestCancelSQL: $1 now, $2 id, $3 user, $4 thread, $5 namespace.
	requestCancelSQL = `
UPDATE mcp_tasks SET
	cancel_requested_at = {now},
	next_cancel_at = COALESCE(next_cancel_at, {now}),
	lease_owner = NULL,
	lease_expires_at = NULL,
	updated_at = {now}
WHERE id = $2 AND user_id = $3 AND thread_id = $4 AND namespace = $5
	AND status IN {non_terminal}
	AND cancel_requested_at IS NULL
RETURNING {columns}`

	// lockUnderLeaseSQL: $1 now, $2 id, $3 owner; {owner} and {expires}
	// name the lease's columns.
	lockUnderLeaseSQL = `
SELECT {columns} FROM mcp_tasks
WHERE id = $2 AND {owner} = $3 AND {expires} > {now}
{row_lock}`

	// updateUnderLeaseSQL: $1 now, $2 id, $3 owner, then {set}'s values.
	updateUnderLeaseSQL = `
UPDATE mcp_tasks SET
	{set},
	updated_at = {now}
WHERE id = $2 AND {owner} = $3`
)

func taskSQL(d Dialect) taskStatements {
	cols := names(taskColumns)
	r := func(query string, extra ...string) string {
		return d.render(strings.NewReplacer(append([]string{
			"{columns}", cols, "{non_terminal}", nonTerminalSQL, "{due_notification}", dueNotificationSQL,
		}, extra...)...).Replace(query))
	}
	// INSERT: $1 now, then every column but updated_at.
	vals, n := make([]string, len(taskColumns)), 2
	for i, c := range taskColumns {
		switch c.write {
		case writeUpdated:
			vals[i] = "{now}"
			continue
		case writeCreated:
			vals[i] = fmt.Sprintf("COALESCE(%s, {now})", d.timeParam(n))
		default:
			vals[i] = fmt.Sprintf("$%d", n)
		}
		n++
	}
	lease := func(owner, expires string, set []column[store.Task]) (lock, update string) {
		repl := []string{"{owner}", owner, "{expires}", expires, "{set}", setList(set, 4)}
		return r(lockUnderLeaseSQL, repl...), r(updateUnderLeaseSQL, repl...)
	}
	q := taskStatements{
		insert: r("INSERT INTO mcp_tasks ({columns})\nVALUES (" + strings.Join(vals, ", ") + ")\nRETURNING {columns}"),
		get:    r("SELECT {columns} FROM mcp_tasks WHERE id = $1"),
		// getOwned: $1 id, $2 user, $3 thread, $4 namespace.
		getOwned: r("SELECT {columns} FROM mcp_tasks WHERE id = $1 AND user_id = $2 AND thread_id = $3 AND namespace = $4"),
		// list: $1 user, $2 thread or '', $3 limit, $4 before (a task id) or '', $5 namespace.
		list: r(`SELECT {columns} FROM mcp_tasks
WHERE namespace = $5 AND user_id = $1 AND (CAST($2 AS TEXT) = '' OR thread_id = $2)
	AND (CAST($4 AS TEXT) = '' OR (created_at, id) < (SELECT b.created_at, b.id FROM mcp_tasks b WHERE b.id = $4 AND b.user_id = $1))
ORDER BY created_at DESC, id DESC
LIMIT $3`),
		claimPolls: r(claimTasksSQL, "{pending}", "IS NULL", "{due}", "next_poll_at", "{attempts}", "poll_attempt_count"),
		claimCancels: r(claimTasksSQL, "{pending}", "IS NOT NULL", "{due}", "next_cancel_at",
			"{attempts}", "cancel_attempt_count"),
		claimNotifications: r(claimNotificationsSQL),
		requestCancel:      r(requestCancelSQL),
		// The counts: $1 namespace.
		countByStatus: r("SELECT status, count(*) FROM mcp_tasks WHERE namespace = $1 GROUP BY status"),
		countPendingNotifications: r(`SELECT count(*) FROM mcp_tasks
WHERE namespace = $1 AND notification_status IN {due_notification} AND event_version > notified_version`),
	}
	q.lockUnderLease, q.updateUnderLease = lease("lease_owner", "lease_expires_at", taskStateColumns)
	q.lockUnderNotification, q.updateNotification = lease("notification_lease_owner", "notification_lease_expires_at", taskOutboxColumns)
	return q
}

var (
	// taskInsertColumns are the INSERT's parameters after now: every
	// column but updated_at.
	taskInsertColumns = pick(taskColumns, writeInsert, writeState, writeOutbox, writeCreated)
	// taskStateColumns are what UpdateTaskUnderLease writes.
	taskStateColumns = pick(taskColumns, writeState, writeOutbox)
	// taskOutboxColumns are what UpdateNotificationUnderLease writes.
	taskOutboxColumns = pick(taskColumns, writeOutbox)
)

// InsertTask implements store.TaskSubmitStore.
func (s *Store) InsertTask(ctx context.Context, p store.InsertTaskParams) (*store.Task, error) {
	t := p.Task
	t.ApplyDefaults()
	if err := t.Validate(); err != nil {
		return nil, err
	}
	args := append([]any{s.d.now(p.Now)}, values(s.d, taskInsertColumns, &t)...)
	got, err := queryRow(ctx, s.db, taskColumns, s.q.tasks.insert, args...)
	if err != nil {
		return nil, s.translate("insert task", err)
	}
	return got, nil
}

// GetTask implements store.TaskAPIStore.
func (s *Store) GetTask(ctx context.Context, p store.GetTaskParams) (*store.Task, error) {
	t, err := queryRow(ctx, s.db, taskColumns, s.q.tasks.get, p.ID)
	if err != nil {
		return nil, s.translate("get task", err)
	}
	return t, nil
}

// ListTasks implements store.TaskAPIStore.
func (s *Store) ListTasks(ctx context.Context, p store.ListTasksParams) ([]store.Task, error) {
	if p.UserID == "" {
		return nil, fmt.Errorf("%w: list tasks: user id must not be empty", store.ErrInvalid)
	}
	limit := cmp.Or(p.Limit, store.DefaultListLimit)
	if limit < 0 {
		return nil, fmt.Errorf("%w: list tasks: limit must not be negative", store.ErrInvalid)
	}
	tasks, err := queryRows(ctx, s.db, taskColumns, s.q.tasks.list, p.UserID, p.ThreadID, limit, p.Before, p.Namespace)
	if err != nil {
		return nil, s.translate("list tasks", err)
	}
	return tasks, nil
}

// RequestCancel implements store.TaskAPIStore.
func (s *Store) RequestCancel(ctx context.Context, p store.RequestCancelParams) (*store.Task, error) {
	t, err := queryRow(ctx, s.db, taskColumns, s.q.tasks.requestCancel, s.d.now(p.Now), p.TaskID, p.UserID, p.ThreadID, p.Namespace)
	if errors.Is(err, sql.ErrNoRows) {
		// Terminal, already requested, or not this user's task in this thread.
		t, err = queryRow(ctx, s.db, taskColumns, s.q.tasks.getOwned, p.TaskID, p.UserID, p.ThreadID, p.Namespace)
	}
	if err != nil {
		return nil, s.translate("request cancel", err)
	}
	return t, nil
}

// ClaimDuePolls implements store.TaskPollStore.
func (s *Store) ClaimDuePolls(ctx context.Context, p store.ClaimParams) ([]store.Task, error) {
	return s.claim(ctx, "claim due polls", s.q.tasks.claimPolls, p, func(t *store.Task) *time.Time { return t.NextPollAt })
}

// ClaimDueCancels implements store.TaskPollStore.
func (s *Store) ClaimDueCancels(ctx context.Context, p store.ClaimParams) ([]store.Task, error) {
	return s.claim(ctx, "claim due cancels", s.q.tasks.claimCancels, p, func(t *store.Task) *time.Time { return t.NextCancelAt })
}

// ClaimDueNotifications implements store.TaskPollStore.
func (s *Store) ClaimDueNotifications(ctx context.Context, p store.ClaimParams) ([]store.Task, error) {
	return s.claim(ctx, "claim due notifications", s.q.tasks.claimNotifications, p,
		func(t *store.Task) *time.Time { return t.NextNotificationAt })
}

// claim runs a claim statement and orders its rows by due time, then id
// (UPDATE … RETURNING has no order).
func (s *Store) claim(ctx context.Context, what, query string, p store.ClaimParams, due func(*store.Task) *time.Time) ([]store.Task, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	tasks, err := queryRows(ctx, s.db, taskColumns, query, s.d.now(p.Now), s.d.duration(p.Lease), p.Owner, p.Limit, p.Namespace)
	if err != nil {
		return nil, s.translate(what, err)
	}
	at := func(t *store.Task) time.Time {
		if d := due(t); d != nil {
			return *d
		}
		return time.Time{}
	}
	slices.SortFunc(tasks, func(a, b store.Task) int {
		return cmp.Or(at(&a).Compare(at(&b)), cmp.Compare(a.ID, b.ID))
	})
	return tasks, nil
}

// UpdateTaskUnderLease implements store.TaskPollStore.
func (s *Store) UpdateTaskUnderLease(ctx context.Context, p store.UpdateUnderLeaseParams) error {
	return s.updateUnderLease(ctx, "update task", s.q.tasks.lockUnderLease, s.q.tasks.updateUnderLease, taskStateColumns, p)
}

// UpdateNotificationUnderLease implements store.TaskPollStore.
func (s *Store) UpdateNotificationUnderLease(ctx context.Context, p store.UpdateUnderLeaseParams) error {
	return s.updateUnderLease(ctx, "update notification", s.q.tasks.lockUnderNotification, s.q.tasks.updateNotification, taskOutboxColumns, p)
}

// updateUnderLease reads the row under a live lease of p.Owner (lockSQL),
// applies p.Update, validates the row and writes cols back (updateSQL), all
// in one transaction. A lease that is gone is store.ErrLeaseLost.
func (s *Store) updateUnderLease(ctx context.Context, what, lockSQL, updateSQL string, cols []column[store.Task], p store.UpdateUnderLeaseParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	now := s.d.now(p.Now)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		t, err := queryRow(ctx, tx, taskColumns, lockSQL, now, p.ID, p.Owner)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		p.Update(t)
		if err := t.Validate(); err != nil {
			return err
		}
		args := append([]any{now, p.ID, p.Owner}, values(s.d, cols, t)...)
		n, err := exec(ctx, tx, updateSQL, args...)
		return rowsAffected(n, err, store.ErrLeaseLost)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrLeaseLost):
		return fmt.Errorf("store: %s: %s %s as %s: %w", s.d.Backend, what, p.ID, p.Owner, store.ErrLeaseLost)
	case errors.Is(err, store.ErrInvalid):
		return err
	default:
		return s.translate(what, err)
	}
}

// CountTasksByStatus implements store.TaskPollStore.
func (s *Store) CountTasksByStatus(ctx context.Context, p store.CountTasksByStatusParams) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, s.q.tasks.countByStatus, p.Namespace)
	if err != nil {
		return nil, s.translate("count tasks by status", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return nil, s.translate("count tasks by status", err)
		}
		out[status] = int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, s.translate("count tasks by status", err)
	}
	return out, nil
}

// CountPendingNotifications implements store.TaskPollStore.
func (s *Store) CountPendingNotifications(ctx context.Context, p store.CountPendingNotificationsParams) (int, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, s.q.tasks.countPendingNotifications, p.Namespace).Scan(&n); err != nil {
		return 0, s.translate("count pending notifications", err)
	}
	return int(n), nil
}
