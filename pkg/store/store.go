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
// their Deps (TaskStore, TokenStore or ConnectionStore).
type Store interface {
	// Backend is "memory", "sqlite" or "postgres".
	Backend() string
	// Ping checks that the database answers (readiness).
	Ping(ctx context.Context) error
	// Close releases the connections; it is idempotent. The sub-stores must
	// not be used afterwards.
	Close() error

	Tasks() TaskStore
	Tokens() TokenStore
	Connections() ConnectionStore
}

// ListTasksParams selects one user's tasks.
type ListTasksParams struct {
	UserID   string // required
	ThreadID string // "" lists every thread of the user
	Limit    int    // 0 means DefaultListLimit
}

// ClaimParams claims due tasks for one poller replica.
type ClaimParams struct {
	// Owner identifies the claiming replica, e.g. "host:uuid". Required.
	Owner string
	// Lease is added to the database clock to set lease_expires_at. Zero is
	// rejected; a negative lease claims rows with a lease that has already
	// expired, which only tests want (it simulates a crashed owner without
	// sleeping).
	Lease time.Duration
	// Limit is the maximum number of rows claimed, at least 1.
	Limit int
}

// Validate reports a missing owner, a zero lease or a limit below 1.
func (p ClaimParams) Validate() error {
	switch {
	case p.Owner == "":
		return fmt.Errorf("%w: claim: owner must not be empty", ErrInvalid)
	case p.Lease == 0:
		return fmt.Errorf("%w: claim: lease must not be zero", ErrInvalid)
	case p.Limit < 1:
		return fmt.Errorf("%w: claim: limit must be at least 1, got %d", ErrInvalid, p.Limit)
	}
	return nil
}

// TaskStore persists durable MCP tasks (mcp_tasks).
//
// Leases: ClaimDueTasks hands a row to one owner until lease_expires_at;
// UpdateTaskUnderLease writes only while that owner still holds a live lease,
// and RequestCancel releases the lease to fence an in-flight poll. The
// database clock decides expiry.
type TaskStore interface {
	// InsertTask stores a new task. Empty ID, Status and NotificationStatus
	// get defaults (see Task.ApplyDefaults); a zero CreatedAt means the
	// database clock. On success *t holds the stored row. A remote task id
	// the same user already tracks on the same server, or a duplicate ID,
	// returns ErrConflict; an invalid task returns ErrInvalid.
	InsertTask(ctx context.Context, t *Task) error

	// GetTask returns one task by id, whoever owns it (callers check
	// UserID/ThreadID), or ErrNotFound.
	GetTask(ctx context.Context, id string) (*Task, error)

	// ListTasks returns a user's tasks, newest first (created_at DESC,
	// id DESC), at most p.Limit of them.
	ListTasks(ctx context.Context, p ListTasksParams) ([]Task, error)

	// ClaimDueTasks leases up to p.Limit non-terminal tasks whose lease is
	// free or expired and that are due: for polling (no cancel requested and
	// next_poll_at <= now) or for cancellation (cancel requested and
	// next_cancel_at <= now; once a cancel is requested next_poll_at no
	// longer matters). Each claimed row gets lease_owner = p.Owner,
	// lease_expires_at = now + p.Lease, updated_at = now, and one more
	// poll_attempt_count (poll claims) or cancel_attempt_count (cancel
	// claims). Rows come back ordered by due time, then id. Concurrent
	// callers, in one process or many, never receive the same row while its
	// lease is live.
	ClaimDueTasks(ctx context.Context, p ClaimParams) ([]Task, error)

	// UpdateTaskUnderLease reads the task, lets update change it, and writes
	// it back, all only while owner holds a live lease on it (lease_owner =
	// owner and lease_expires_at > now); otherwise it returns ErrLeaseLost and
	// writes nothing. It also returns ErrLeaseLost when the task does not
	// exist.
	//
	// update runs inside a transaction holding the row: keep it quick, free
	// of I/O, and never call the store from it (on SQLite the single
	// connection is busy, so that would deadlock). It may change every field except ID, UserID, ThreadID,
	// RunID, ToolCallID, ServerName, DriverName, RemoteTaskID, TaskName and
	// CreatedAt (changes to those are ignored); UpdatedAt is set to the
	// database clock. To release the lease, set LeaseOwner to "" and
	// LeaseExpiresAt to nil.
	UpdateTaskUnderLease(ctx context.Context, id, owner string, update func(*Task)) error

	// RequestCancel records a cancel request for the user's task in that
	// thread. On a non-terminal task without a request yet it sets
	// cancel_requested_at = now, next_cancel_at = now when null, and
	// releases the lease (fencing any in-flight poll); otherwise it changes
	// nothing. It returns the row as stored afterwards, or ErrNotFound when
	// no task matches id, user and thread. It makes no remote call.
	RequestCancel(ctx context.Context, userID, threadID, taskID string) (*Task, error)
}

// TokenStore persists OAuth refresh-token chains (mcp_oauth_tokens).
//
// The refresh lease serialises refreshes across replicas: ClaimRefreshLease
// before the HTTP request, RenewRefreshLease while it runs, PutToken with the
// result, then ReleaseRefreshLease. The database clock decides expiry.
type TokenStore interface {
	// GetToken returns the row for key, or ErrNotFound.
	GetToken(ctx context.Context, key string) (*OAuthToken, error)

	// PutToken inserts or replaces the token fields of t.ConnectionKey. It
	// never changes the lease. On success *t holds the stored row, lease
	// included.
	PutToken(ctx context.Context, t *OAuthToken) error

	// ClaimRefreshLease sets the refresh lease of key to owner until
	// now + ttl, creating the row when missing, and reports true, when the
	// lease is free, expired or already owner's (then it is extended);
	// otherwise it reports false and changes nothing. A negative ttl gives a
	// lease that has already expired (tests only); zero is rejected.
	ClaimRefreshLease(ctx context.Context, key, owner string, ttl time.Duration) (bool, error)

	// RenewRefreshLease extends owner's live lease to now + ttl, or returns
	// ErrLeaseLost when owner no longer holds a live lease.
	RenewRefreshLease(ctx context.Context, key, owner string, ttl time.Duration) error

	// ReleaseRefreshLease clears the lease if owner holds it (live or
	// expired); otherwise it does nothing and returns nil.
	ReleaseRefreshLease(ctx context.Context, key, owner string) error

	// DeleteToken removes the row for key; a missing row is not an error.
	DeleteToken(ctx context.Context, key string) error
}

// ConnectionStore persists users' personal MCP connections
// (mcp_personal_connections).
type ConnectionStore interface {
	// ListConnections returns the user's connections ordered by name.
	ListConnections(ctx context.Context, userID string) ([]PersonalConnection, error)

	// GetConnection returns one connection, or ErrNotFound.
	GetConnection(ctx context.Context, userID, name string) (*PersonalConnection, error)

	// PutConnection inserts or replaces (UserID, Name), keeping CreatedAt of
	// an existing row. On success *c holds the stored row.
	PutConnection(ctx context.Context, c *PersonalConnection) error

	// DeleteConnection removes one connection, or returns ErrNotFound.
	DeleteConnection(ctx context.Context, userID, name string) error
}

// ValidateLease checks the arguments of the refresh-lease methods (shared by
// the backends): a key, an owner and a non-zero ttl.
func ValidateLease(key, owner string, ttl time.Duration) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: refresh lease: connection key must not be empty", ErrInvalid)
	case owner == "":
		return fmt.Errorf("%w: refresh lease: owner must not be empty", ErrInvalid)
	case ttl == 0:
		return fmt.Errorf("%w: lease ttl must not be zero", ErrInvalid)
	}
	return nil
}
