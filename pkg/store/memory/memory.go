package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// Store is an in-memory store.Store. It is safe for concurrent use; the zero
// value is not usable, call New.
type Store struct {
	tokens *tokenStore
	conns  *connectionStore
}

var _ store.Store = (*Store)(nil)

// New returns an empty in-memory store.
func New() *Store {
	return &Store{
		tokens: &tokenStore{rows: map[string]store.OAuthToken{}},
		conns:  &connectionStore{rows: map[connectionKey]store.PersonalConnection{}},
	}
}

// clock is the process clock, or the caller's Now parameter when set.
type clock struct{}

func (clock) now(at *time.Time) time.Time {
	if at != nil {
		return at.UTC()
	}
	return time.Now().UTC()
}

// Backend returns "memory".
func (s *Store) Backend() string { return store.BackendMemory }

// Ping always succeeds.
func (s *Store) Ping(context.Context) error { return nil }

// Close does nothing; the data stays readable until the Store is dropped.
func (s *Store) Close() error { return nil }

// Tasks returns a TaskStore whose methods all return errNoTasks.
func (s *Store) Tasks() store.TaskStore { return UnavailableTasks{} }

// Tokens returns the OAuth token store.
func (s *Store) Tokens() store.TokenStore { return s.tokens }

// Connections returns the personal connection store.
func (s *Store) Connections() store.ConnectionStore { return s.conns }

// Audit returns an AuditStore whose methods all return an error wrapping
// store.ErrUnavailable (audit.database needs sqlite or postgres).
func (s *Store) Audit() store.AuditStore { return UnavailableAudit{} }

// UnavailableAudit is a store.AuditStore for backends without an audit
// table: every method returns an error wrapping store.ErrUnavailable.
type UnavailableAudit struct{}

var _ store.AuditStore = UnavailableAudit{}

var errNoAudit = fmt.Errorf("store: memory: audit.database needs database.backend sqlite or postgres: %w",
	store.ErrUnavailable)

func (UnavailableAudit) InsertAuditRecords(context.Context, store.InsertAuditRecordsParams) error {
	return errNoAudit
}

func (UnavailableAudit) ListAuditRecords(context.Context, store.ListAuditRecordsParams) ([]store.AuditRecord, error) {
	return nil, errNoAudit
}

func (UnavailableAudit) PruneAuditRecords(context.Context, store.PruneAuditRecordsParams) (int, error) {
	return 0, errNoAudit
}

// UnavailableTasks is a store.TaskStore for backends without durable tasks:
// every method returns an error wrapping store.ErrUnavailable.
type UnavailableTasks struct{}

var _ store.TaskStore = UnavailableTasks{}

var errNoTasks = fmt.Errorf("store: memory: durable tasks need database.backend sqlite or postgres: %w",
	store.ErrUnavailable)

func (UnavailableTasks) InsertTask(context.Context, store.InsertTaskParams) (*store.Task, error) {
	return nil, errNoTasks
}

func (UnavailableTasks) GetTask(context.Context, store.GetTaskParams) (*store.Task, error) {
	return nil, errNoTasks
}

func (UnavailableTasks) ListTasks(context.Context, store.ListTasksParams) ([]store.Task, error) {
	return nil, errNoTasks
}

func (UnavailableTasks) RequestCancel(context.Context, store.RequestCancelParams) (*store.Task, error) {
	return nil, errNoTasks
}

func (UnavailableTasks) ClaimDuePolls(context.Context, store.ClaimParams) ([]store.Task, error) {
	return nil, errNoTasks
}

func (UnavailableTasks) ClaimDueCancels(context.Context, store.ClaimParams) ([]store.Task, error) {
	return nil, errNoTasks
}

func (UnavailableTasks) ClaimDueNotifications(context.Context, store.ClaimParams) ([]store.Task, error) {
	return nil, errNoTasks
}

func (UnavailableTasks) UpdateTaskUnderLease(context.Context, store.UpdateUnderLeaseParams) error {
	return errNoTasks
}

func (UnavailableTasks) UpdateNotificationUnderLease(context.Context, store.UpdateUnderLeaseParams) error {
	return errNoTasks
}

func (UnavailableTasks) CountTasksByStatus(context.Context, store.CountTasksByStatusParams) (map[string]int, error) {
	return nil, errNoTasks
}

func (UnavailableTasks) CountPendingNotifications(context.Context, store.CountPendingNotificationsParams) (int, error) {
	return 0, errNoTasks
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func cloneJSON(b json.RawMessage) json.RawMessage { return json.RawMessage(cloneBytes(b)) }

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// Pins returns a PinStore whose methods all return an error wrapping
// store.ErrUnavailable (tool pinning needs sqlite or postgres).
func (s *Store) Pins() store.PinStore { return UnavailablePins{} }

// UnavailablePins is a store.PinStore for backends without the pinning
// tables: every method returns an error wrapping store.ErrUnavailable.
type UnavailablePins struct{}

var _ store.PinStore = UnavailablePins{}

var errNoPins = fmt.Errorf("store: memory: tool pinning needs database.backend sqlite or postgres: %w",
	store.ErrUnavailable)

func (UnavailablePins) RecordDefinitions(context.Context, store.RecordDefinitionsParams) error {
	return errNoPins
}

func (UnavailablePins) GetDefinition(context.Context, store.DefinitionParams) (*store.ToolDefinition, error) {
	return nil, errNoPins
}

func (UnavailablePins) ListServerPins(context.Context, store.ServerPinsParams) ([]store.ToolPin, error) {
	return nil, errNoPins
}

func (UnavailablePins) PutPin(context.Context, store.PutPinParams) (*store.ToolPin, error) {
	return nil, errNoPins
}

func (UnavailablePins) ListPins(context.Context, store.ListPinsParams) ([]store.ToolPin, error) {
	return nil, errNoPins
}

func (UnavailablePins) DecidePin(context.Context, store.DecidePinParams) (*store.ToolPin, error) {
	return nil, errNoPins
}
