package postgres

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/internal/sqlschema"
)

var _ store.TaskRuntimeStore = (*taskStore)(nil)

// claimCancelsSQL: $1 owner, $2 lease in microseconds, $3 limit.
const claimCancelsSQL = `
UPDATE mcp_tasks SET
	lease_owner = $1,
	lease_expires_at = now() + $2::bigint * interval '1 microsecond',
	cancel_attempt_count = cancel_attempt_count + 1,
	updated_at = now()
WHERE id IN (
	SELECT id FROM mcp_tasks
	WHERE cancel_requested_at IS NOT NULL
		AND next_cancel_at <= now()
		AND status IN ` + sqlschema.NonTerminal + `
		AND (lease_expires_at IS NULL OR lease_expires_at <= now())
	ORDER BY next_cancel_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED)
RETURNING ` + sqlschema.TaskColumns

// claimPollsSQL: $1 owner, $2 lease in microseconds, $3 limit.
const claimPollsSQL = `
UPDATE mcp_tasks SET
	lease_owner = $1,
	lease_expires_at = now() + $2::bigint * interval '1 microsecond',
	poll_attempt_count = poll_attempt_count + 1,
	updated_at = now()
WHERE id IN (
	SELECT id FROM mcp_tasks
	WHERE status IN ` + sqlschema.NonTerminal + `
		AND next_poll_at <= now()
		AND cancel_requested_at IS NULL
		AND (lease_expires_at IS NULL OR lease_expires_at <= now())
	ORDER BY next_poll_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED)
RETURNING ` + sqlschema.TaskColumns

// claimNotificationsSQL: $1 owner, $2 lease in microseconds, $3 limit.
const claimNotificationsSQL = `
UPDATE mcp_tasks SET
	notification_lease_owner = $1,
	notification_lease_expires_at = now() + $2::bigint * interval '1 microsecond'
WHERE id IN (
	SELECT id FROM mcp_tasks
	WHERE notification_status IN ('pending', 'claimed', 'retry')
		AND next_notification_at <= now()
		AND event_version > notified_version
		AND (notification_lease_expires_at IS NULL OR notification_lease_expires_at <= now())
	ORDER BY next_notification_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED)
RETURNING ` + sqlschema.TaskColumns

const lockTaskUnderNotificationLeaseSQL = `
SELECT ` + sqlschema.TaskColumns + ` FROM mcp_tasks
WHERE id = $1 AND notification_lease_owner = $2 AND notification_lease_expires_at > now()
FOR UPDATE`

// updateNotificationSQL writes the outbox columns ($3…$14) of a row locked
// by lockTaskUnderNotificationLeaseSQL.
const updateNotificationSQL = `
UPDATE mcp_tasks SET
	notification_status = $3, event_fingerprint = $4, event_version = $5, notified_version = $6,
	dispatch_version = $7, dispatch_attempt = $8, dispatch_event = $9, notification_error = $10,
	notification_attempt_count = $11, next_notification_at = $12, notification_lease_owner = $13,
	notification_lease_expires_at = $14,
	updated_at = now()
WHERE id = $1 AND notification_lease_owner = $2`

func (s *taskStore) ClaimDueCancels(ctx context.Context, p store.ClaimParams) ([]store.Task, error) {
	return s.claim(ctx, "claim due cancels", claimCancelsSQL, p)
}

func (s *taskStore) ClaimDuePolls(ctx context.Context, p store.ClaimParams) ([]store.Task, error) {
	return s.claim(ctx, "claim due polls", claimPollsSQL, p)
}

func (s *taskStore) ClaimDueNotifications(ctx context.Context, p store.ClaimParams) ([]store.Task, error) {
	tasks, err := s.claim(ctx, "claim due notifications", claimNotificationsSQL, p)
	if err != nil {
		return nil, err
	}
	store.SortClaimedNotifications(tasks)
	return tasks, nil
}

func (s *taskStore) claim(ctx context.Context, what, query string, p store.ClaimParams) ([]store.Task, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	tasks, err := collectAll(s.pool.Query(ctx, query, p.Owner, p.Lease.Microseconds(), p.Limit))
	if err != nil {
		return nil, translate(what, err)
	}
	store.SortClaimed(tasks)
	return tasks, nil
}

func (s *taskStore) UpdateNotificationUnderLease(ctx context.Context, id, owner string, update func(*store.Task)) error {
	return s.updateUnderLease(ctx, "update notification", id, owner, lockTaskUnderNotificationLeaseSQL, updateNotificationSQL,
		func(t *store.Task) []any {
			return []any{t.NotificationStatus, nullText(t.EventFingerprint), t.EventVersion, t.NotifiedVersion,
				t.DispatchVersion, t.DispatchAttempt, nullJSON(t.DispatchEvent), nullText(t.NotificationError),
				t.NotificationAttemptCount, t.NextNotificationAt, nullText(t.NotificationLeaseOwner),
				t.NotificationLeaseExpiresAt}
		}, update)
}
