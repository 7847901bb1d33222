package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// TaskRuntimeStore is what the task poller needs beyond TaskStore: claims
// split by purpose (cancels, polls, notifications) and the write guarded by
// the notification lease. The postgres and sqlite task stores implement it;
// use TaskRuntime to get it from a Store.
//
// The notification lease is separate from the poll/cancel lease: a poller may
// publish a row's notification while another polls it. Both writes read the
// row under its lock and change only their own columns' values, so neither
// loses the other's update.
type TaskRuntimeStore interface {
	TaskStore

	// ClaimDueCancels leases, as ClaimDueTasks does, only rows whose cancel
	// is requested and due (next_cancel_at <= now), adding one to
	// cancel_attempt_count, ordered by next_cancel_at then id.
	ClaimDueCancels(ctx context.Context, p ClaimParams) ([]Task, error)

	// ClaimDuePolls leases, as ClaimDueTasks does, only rows without a cancel
	// request that are due for polling (next_poll_at <= now), adding one to
	// poll_attempt_count, ordered by next_poll_at then id.
	ClaimDuePolls(ctx context.Context, p ClaimParams) ([]Task, error)

	// ClaimDueNotifications leases up to p.Limit rows whose notification is
	// due: event_version > notified_version, notification_status pending,
	// claimed or retry, next_notification_at <= now and the notification
	// lease free or expired. Each gets notification_lease_owner = p.Owner and
	// notification_lease_expires_at = now + p.Lease. Rows come back ordered
	// by next_notification_at, then id. Concurrent callers never receive the
	// same row while its notification lease is live (SKIP LOCKED on
	// PostgreSQL, the single writer on SQLite).
	ClaimDueNotifications(ctx context.Context, p ClaimParams) ([]Task, error)

	// UpdateNotificationUnderLease reads the task, lets update change it and
	// writes back only the notification outbox columns (notification_status
	// … notification_lease_expires_at), all only while owner holds a live
	// notification lease; otherwise it returns ErrLeaseLost and writes
	// nothing. The rules of UpdateTaskUnderLease for update apply.
	UpdateNotificationUnderLease(ctx context.Context, id, owner string, update func(*Task)) error
}

// TaskRuntime returns the store's TaskRuntimeStore, or ErrUnavailable when
// its backend has none (memory).
func TaskRuntime(s Store) (TaskRuntimeStore, error) {
	if rt, ok := s.Tasks().(TaskRuntimeStore); ok {
		return rt, nil
	}
	return nil, fmt.Errorf("%w: durable tasks need the sqlite or postgres backend, not %s", ErrUnavailable, s.Backend())
}

// SortClaimed orders claimed tasks as ClaimDueTasks, ClaimDueCancels and
// ClaimDuePolls return them: by due time (next_cancel_at once a cancel is
// requested, next_poll_at otherwise), then id. SQL backends use it because
// UPDATE … RETURNING has no order.
func SortClaimed(tasks []Task) {
	due := func(t *Task) time.Time {
		if t.CancelRequestedAt != nil && t.NextCancelAt != nil {
			return *t.NextCancelAt
		}
		return timeOrZero(t.NextPollAt)
	}
	slices.SortFunc(tasks, func(a, b Task) int {
		return cmp.Or(due(&a).Compare(due(&b)), cmp.Compare(a.ID, b.ID))
	})
}

// SortClaimedNotifications orders tasks as ClaimDueNotifications returns
// them: by next_notification_at, then id.
func SortClaimedNotifications(tasks []Task) {
	slices.SortFunc(tasks, func(a, b Task) int {
		return cmp.Or(timeOrZero(a.NextNotificationAt).Compare(timeOrZero(b.NextNotificationAt)), cmp.Compare(a.ID, b.ID))
	})
}

func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
