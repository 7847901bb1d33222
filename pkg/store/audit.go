package store

import (
	"context"
	"encoding/json"
	"time"
)

// AuditRecord is one row of mcp_audit: a tool call or a config change
// (package audit's Record, flattened). It never holds a secret: Arguments
// are masked before they get here, Changes name keys, never values.
type AuditRecord struct {
	// ID is assigned by the database (ascending in insert order).
	ID   int64
	Time time.Time
	// Kind is "call" or "config".
	Kind       string
	UserID     string
	ThreadID   string
	Tool       string
	ServerName string
	Transport  string
	Outcome    string
	DurationMS float64
	// ResultBytes is the size of a call's result.
	ResultBytes int
	RequestID   string
	TraceID     string
	// Action is a config change's API action (put_config, …).
	Action string
	// Arguments are a call's masked, capped arguments (JSON), only with
	// audit.capture_arguments.
	Arguments          json.RawMessage
	ArgumentsTruncated bool
	// Changes are a config change's changes (JSON list).
	Changes json.RawMessage
	// VirtualServer is the virtual server a call came through and Policy
	// the access policy's decision on it (audit.Record's).
	VirtualServer string
	Policy        string
}

// AuditStore persists the audit log in the database (mcp_audit), for
// audit.database: true.
type AuditStore interface {
	// InsertAuditRecords stores the records in one transaction (their IDs
	// are ignored). A record without a kind or time is ErrInvalid.
	InsertAuditRecords(ctx context.Context, p InsertAuditRecordsParams) error

	// ListAuditRecords returns the newest p.Limit records matching the
	// filters, oldest first.
	ListAuditRecords(ctx context.Context, p ListAuditRecordsParams) ([]AuditRecord, error)

	// PruneAuditRecords deletes the records older than p.Before and
	// returns how many it deleted. It is idempotent: replicas may prune at
	// the same time.
	PruneAuditRecords(ctx context.Context, p PruneAuditRecordsParams) (int, error)
}

// InsertAuditRecordsParams are the records to store.
type InsertAuditRecordsParams struct {
	Records []AuditRecord
}

// ListAuditRecordsParams selects audit records; empty strings match any.
type ListAuditRecordsParams struct {
	Kind   string
	UserID string
	Tool   string
	// Since, when set, keeps records at or after it.
	Since time.Time
	// Limit is at least 1.
	Limit int
}

// PruneAuditRecordsParams names the cutoff of a prune.
type PruneAuditRecordsParams struct {
	Before time.Time
}
