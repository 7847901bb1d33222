package store

import (
	"context"
	"fmt"
	"time"
)

// Backend names, as in config.DatabaseSettings.Backend.
const (
	BackendMemory   = "memory"
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// DefaultListLimit is the ListTasks limit when ListTasksParams.Limit is 0.
const DefaultListLimit = 50

// Store is one open database. Services name only the sub-store they use in
// their Deps (one of the task interfaces, TokenStore or ConnectionStore).
type Store interface {
	// Backend is "memory", "sqlite" or "postgres".
	Backend() string
	// Ping checks that the database answers (readiness).
	Ping(ctx context.Context) error
	// Close releases the connections; it is idempotent. The sub-stores must
	// not be used afterwards.
	Close() error

	// Tasks returns the durable task store. On the memory backend every
	// method of it returns an error wrapping ErrUnavailable.
	Tasks() TaskStore
	Tokens() TokenStore
	Connections() ConnectionStore
	// Audit returns the audit log table. On the memory backend every
	// method of it returns an error wrapping ErrUnavailable.
	Audit() AuditStore
	// Pins returns the tool pinning tables. On the memory backend every
	// method of it returns an error wrapping ErrUnavailable.
	Pins() PinStore
}

// TaskStore persists durable MCP tasks (mcp_tasks): the union of what its
// three consumers need.
type TaskStore interface {
	TaskSubmitStore
	TaskAPIStore
	TaskPollStore
}

// TaskSubmitStore is what a task-toolset submit needs (toolcall).
type TaskSubmitStore interface {
	// InsertTask stores a new task and returns the stored row. Empty ID,
	// Status and NotificationStatus get defaults (see Task.ApplyDefaults);
	// a zero CreatedAt means now. A remote task id the same user already
	// tracks on the same server, or a duplicate ID, returns ErrConflict; an
	// invalid task returns ErrInvalid.
	InsertTask(ctx context.Context, p InsertTaskParams) (*Task, error)
}

// TaskAPIStore is what the task API needs (list, get, cancel).
type TaskAPIStore interface {
	// GetTask returns one task by id, whoever owns it (callers check
	// UserID/ThreadID), or ErrNotFound.
	GetTask(ctx context.Context, p GetTaskParams) (*Task, error)

	// ListTasks returns a user's tasks, newest first (created_at DESC,
	// id DESC), at most p.Limit of them.
	ListTasks(ctx context.Context, p ListTasksParams) ([]Task, error)

	// RequestCancel records a cancel request for the user's task in that
	// thread. On a non-terminal task without a request yet it sets
	// cancel_requested_at = now, next_cancel_at = now when null, and
	// releases the lease (fencing any in-flight poll); otherwise it changes
	// nothing. It returns the row as stored afterwards, or ErrNotFound when
	// no task matches id, user and thread. It makes no remote call.
	RequestCancel(ctx context.Context, p RequestCancelParams) (*Task, error)
}

// TaskPollStore is what the task poller needs: claims split by purpose
// (cancels, polls, notifications) and the writes guarded by the leases.
//
// Leases: a claim hands a row to one owner until lease_expires_at;
// UpdateTaskUnderLease writes only while that owner still holds a live
// lease, and RequestCancel releases the lease to fence an in-flight poll.
// Concurrent claimers, in one process or many, never receive the same row
// while its lease is live (SKIP LOCKED on PostgreSQL, the single writer on
// SQLite).
//
// The notification lease is separate from the poll/cancel lease: a poller may
// publish a row's notification while another polls it. Both writes read the
// row under its lock and change only their own columns, so neither loses the
// other's update.
type TaskPollStore interface {
	// ClaimDueCancels leases up to p.Limit non-terminal rows whose lease is
	// free or expired and whose cancel is requested and due
	// (next_cancel_at <= now), adding one to cancel_attempt_count, setting
	// lease_owner = p.Owner, lease_expires_at = now + p.Lease and
	// updated_at = now. Rows come back ordered by next_cancel_at, then id.
	ClaimDueCancels(ctx context.Context, p ClaimParams) ([]Task, error)

	// ClaimDuePolls leases, as ClaimDueCancels does, only rows without a
	// cancel request that are due for polling (next_poll_at <= now), adding
	// one to poll_attempt_count, ordered by next_poll_at then id.
	ClaimDuePolls(ctx context.Context, p ClaimParams) ([]Task, error)

	// ClaimDueNotifications leases up to p.Limit rows whose notification is
	// due: event_version > notified_version, notification_status pending,
	// claimed or retry, next_notification_at <= now and the notification
	// lease free or expired. Each gets notification_lease_owner = p.Owner and
	// notification_lease_expires_at = now + p.Lease. Rows come back ordered
	// by next_notification_at, then id.
	ClaimDueNotifications(ctx context.Context, p ClaimParams) ([]Task, error)

	// UpdateTaskUnderLease reads the task, lets p.Update change it, and
	// writes it back, all only while p.Owner holds a live lease on it
	// (lease_owner = owner and lease_expires_at > now); otherwise it returns
	// ErrLeaseLost and writes nothing. It also returns ErrLeaseLost when the
	// task does not exist.
	//
	// p.Update runs inside a transaction holding the row: keep it quick,
	// free of I/O, and never call the store from it (on SQLite the single
	// connection is busy, so that would deadlock). It may change every field
	// except ID, UserID, ThreadID, RunID, ToolCallID, ServerName, DriverName,
	// RemoteTaskID, TaskName and CreatedAt (changes to those are ignored);
	// UpdatedAt is set to now. To release the lease, set LeaseOwner to ""
	// and LeaseExpiresAt to nil.
	UpdateTaskUnderLease(ctx context.Context, p UpdateUnderLeaseParams) error

	// UpdateNotificationUnderLease is UpdateTaskUnderLease for the
	// notification lease: it writes back only the notification outbox
	// columns (notification_status … notification_lease_expires_at), only
	// while p.Owner holds a live notification lease.
	UpdateNotificationUnderLease(ctx context.Context, p UpdateUnderLeaseParams) error

	// CountTasksByStatus returns how many rows are in each status now
	// (SELECT status, count(*) … GROUP BY status); a status without rows is
	// absent from the map.
	CountTasksByStatus(ctx context.Context, p CountTasksByStatusParams) (map[string]int, error)

	// CountPendingNotifications returns the outbox backlog: the rows with
	// an undelivered event (event_version > notified_version with
	// notification_status pending, claimed or retry), due or backing off,
	// leased or not.
	CountPendingNotifications(ctx context.Context, p CountPendingNotificationsParams) (int, error)
}

// TokenStore persists OAuth refresh-token chains (mcp_oauth_tokens).
//
// The refresh lease serialises refreshes across replicas: ClaimRefreshLease
// before the HTTP request, RenewRefreshLease while it runs, PutToken with the
// result, then ReleaseRefreshLease.
type TokenStore interface {
	// GetToken returns the row for p.Key, or ErrNotFound.
	GetToken(ctx context.Context, p GetTokenParams) (*OAuthToken, error)

	// PutToken inserts or replaces the token fields of p.Token.ConnectionKey
	// and returns the stored row, lease included. It never changes the
	// lease.
	PutToken(ctx context.Context, p PutTokenParams) (*OAuthToken, error)

	// ClaimRefreshLease sets the refresh lease of p.Key to p.Owner until
	// now + p.TTL, creating the row when missing, and reports true, when the
	// lease is free, expired or already p.Owner's (then it is extended);
	// otherwise it reports false and changes nothing.
	ClaimRefreshLease(ctx context.Context, p RefreshLeaseParams) (bool, error)

	// RenewRefreshLease extends p.Owner's live lease to now + p.TTL, or
	// returns ErrLeaseLost when p.Owner no longer holds a live lease.
	RenewRefreshLease(ctx context.Context, p RefreshLeaseParams) error

	// ReleaseRefreshLease clears the lease if p.Owner holds it (live or
	// expired); otherwise it does nothing and returns nil. p.TTL is unused.
	ReleaseRefreshLease(ctx context.Context, p RefreshLeaseParams) error

	// DeleteToken removes the row for p.Key; a missing row is not an error.
	DeleteToken(ctx context.Context, p DeleteTokenParams) error
}

// ConnectionStore persists users' personal MCP connections
// (mcp_personal_connections).
type ConnectionStore interface {
	// ListConnections returns the user's connections ordered by name.
	ListConnections(ctx context.Context, p ListConnectionsParams) ([]PersonalConnection, error)

	// GetConnection returns one connection, or ErrNotFound.
	GetConnection(ctx context.Context, p ConnectionParams) (*PersonalConnection, error)

	// PutConnection inserts or replaces (UserID, Name), keeping CreatedAt of
	// an existing row, and returns the stored row.
	PutConnection(ctx context.Context, p PutConnectionParams) (*PersonalConnection, error)

	// DeleteConnection removes one connection, or returns ErrNotFound.
	DeleteConnection(ctx context.Context, p ConnectionParams) error
}

// Every Now field below is the time the store writes and compares with;
// nil (what production passes) means the database clock. Tests set it to
// run a lease past its expiry without sleeping.

// InsertTaskParams is the row InsertTask stores.
type InsertTaskParams struct {
	Task Task
	Now  *time.Time
}

// GetTaskParams names one task.
type GetTaskParams struct {
	ID string
}

// ListTasksParams selects one user's tasks.
type ListTasksParams struct {
	// Namespace is the deployment's nats.namespace: only its tasks are listed.
	Namespace string
	UserID    string // required
	ThreadID  string // "" lists every thread of the user
	Limit     int    // 0 means DefaultListLimit
	// Before continues the list after the user's task with this id (in
	// list order); "" starts at the newest. Another user's id, or an
	// unknown one, lists nothing.
	Before string
}

// RequestCancelParams names the user's task in a thread.
type RequestCancelParams struct {
	// Namespace is the deployment's nats.namespace: another's task is not found.
	Namespace                string
	UserID, ThreadID, TaskID string
	Now                      *time.Time
}

// ClaimParams claims due tasks for one poller replica.
type ClaimParams struct {
	// Namespace is the poller's nats.namespace: only tasks its deployment
	// submitted are claimed.
	Namespace string
	// Owner identifies the claiming replica, e.g. "host:uuid". Required.
	Owner string
	// Lease is added to now to set the lease expiry; it must be positive.
	Lease time.Duration
	// Limit is the maximum number of rows claimed, at least 1.
	Limit int
	Now   *time.Time
}

// Validate reports a missing owner, a lease that is not positive or a limit
// below 1.
func (p ClaimParams) Validate() error {
	switch {
	case p.Owner == "":
		return fmt.Errorf("%w: claim: owner must not be empty", ErrInvalid)
	case p.Lease <= 0:
		return fmt.Errorf("%w: claim: lease must be positive, got %v", ErrInvalid, p.Lease)
	case p.Limit < 1:
		return fmt.Errorf("%w: claim: limit must be at least 1, got %d", ErrInvalid, p.Limit)
	}
	return nil
}

// UpdateUnderLeaseParams is a write guarded by a lease that Owner holds.
type UpdateUnderLeaseParams struct {
	ID, Owner string
	// Update changes the row read under the lease (see
	// TaskPollStore.UpdateTaskUnderLease for its rules).
	Update func(*Task)
	Now    *time.Time
}

// Validate reports a missing id, owner or update.
func (p UpdateUnderLeaseParams) Validate() error {
	switch {
	case p.ID == "":
		return fmt.Errorf("%w: update under lease: id must not be empty", ErrInvalid)
	case p.Owner == "":
		return fmt.Errorf("%w: update under lease: owner must not be empty", ErrInvalid)
	case p.Update == nil:
		return fmt.Errorf("%w: update under lease: update must not be nil", ErrInvalid)
	}
	return nil
}

// CountTasksByStatusParams selects the tasks of one deployment.
type CountTasksByStatusParams struct {
	Namespace string // the deployment's nats.namespace
}

// CountPendingNotificationsParams selects the tasks of one deployment.
type CountPendingNotificationsParams struct {
	Namespace string // the deployment's nats.namespace
}

// GetTokenParams names one token row.
type GetTokenParams struct {
	Key string
}

// DeleteTokenParams names one token row.
type DeleteTokenParams struct {
	Key string
}

// PutTokenParams is the row PutToken stores (its lease fields are ignored).
type PutTokenParams struct {
	Token OAuthToken
	Now   *time.Time
}

// RefreshLeaseParams is a refresh-lease operation on one token row.
type RefreshLeaseParams struct {
	Key   string
	Owner string
	TTL   time.Duration // claim and renew: positive
	Now   *time.Time
}

// Validate checks a claim or renewal: a key, an owner and a positive TTL.
func (p RefreshLeaseParams) Validate() error {
	switch {
	case p.Key == "":
		return fmt.Errorf("%w: refresh lease: connection key must not be empty", ErrInvalid)
	case p.Owner == "":
		return fmt.Errorf("%w: refresh lease: owner must not be empty", ErrInvalid)
	case p.TTL <= 0:
		return fmt.Errorf("%w: refresh lease: ttl must be positive, got %v", ErrInvalid, p.TTL)
	}
	return nil
}

// ListConnectionsParams selects one user's connections.
type ListConnectionsParams struct {
	UserID string
}

// ConnectionParams names one connection.
type ConnectionParams struct {
	UserID, Name string
}

// PutConnectionParams is the row PutConnection stores (its times are set by
// the store).
type PutConnectionParams struct {
	Connection PersonalConnection
	Now        *time.Time
}
