package sqlstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// write says which statements write a column.
type write int

const (
	// writeInsert: written by INSERT only (identity columns).
	writeInsert write = iota
	// writeState: also written by UpdateTaskUnderLease.
	writeState
	// writeOutbox: also written by UpdateNotificationUnderLease (and so by
	// UpdateTaskUnderLease).
	writeOutbox
	// writeCreated: INSERT writes the value, or now when it is zero.
	writeCreated
	// writeUpdated: every write sets now.
	writeUpdated
)

// column is one column of a table of rows of type T: its name, the pointer to
// its field in T, and which writes touch it. The field's Go type decides the
// encoding: "" is NULL for strings, nil or empty is NULL for JSON and bytes,
// nil is NULL for *time.Time.
type column[T any] struct {
	name  string
	field func(*T) any
	write write
}

// taskColumns is mcp_tasks, in the order every statement lists it.
var taskColumns = []column[store.Task]{
	{"id", func(t *store.Task) any { return &t.ID }, writeInsert},
	{"namespace", func(t *store.Task) any { return (*notNull)(&t.Namespace) }, writeInsert},
	{"user_id", func(t *store.Task) any { return &t.UserID }, writeInsert},
	{"thread_id", func(t *store.Task) any { return &t.ThreadID }, writeInsert},
	{"run_id", func(t *store.Task) any { return &t.RunID }, writeInsert},
	{"tool_call_id", func(t *store.Task) any { return &t.ToolCallID }, writeInsert},
	{"server_name", func(t *store.Task) any { return &t.ServerName }, writeInsert},
	{"driver_name", func(t *store.Task) any { return &t.DriverName }, writeInsert},
	{"remote_task_id", func(t *store.Task) any { return &t.RemoteTaskID }, writeInsert},
	{"task_name", func(t *store.Task) any { return &t.TaskName }, writeInsert},
	{"status", func(t *store.Task) any { return &t.Status }, writeState},

	{"result", func(t *store.Task) any { return &t.Result }, writeState},
	{"result_preview", func(t *store.Task) any { return &t.ResultPreview }, writeState},
	{"result_truncated", func(t *store.Task) any { return &t.ResultTruncated }, writeState},
	{"result_artifact", func(t *store.Task) any { return &t.ResultArtifact }, writeState},
	{"error", func(t *store.Task) any { return &t.Error }, writeState},
	{"input_required", func(t *store.Task) any { return &t.InputRequired }, writeState},
	{"driver_data", func(t *store.Task) any { return &t.DriverData }, writeState},

	{"notification_status", func(t *store.Task) any { return &t.NotificationStatus }, writeOutbox},
	{"event_fingerprint", func(t *store.Task) any { return &t.EventFingerprint }, writeOutbox},
	{"event_version", func(t *store.Task) any { return &t.EventVersion }, writeOutbox},
	{"notified_version", func(t *store.Task) any { return &t.NotifiedVersion }, writeOutbox},
	{"dispatch_version", func(t *store.Task) any { return &t.DispatchVersion }, writeOutbox},
	{"dispatch_attempt", func(t *store.Task) any { return &t.DispatchAttempt }, writeOutbox},
	{"dispatch_event", func(t *store.Task) any { return &t.DispatchEvent }, writeOutbox},
	{"notification_error", func(t *store.Task) any { return &t.NotificationError }, writeOutbox},
	{"notification_attempt_count", func(t *store.Task) any { return &t.NotificationAttemptCount }, writeOutbox},
	{"next_notification_at", func(t *store.Task) any { return &t.NextNotificationAt }, writeOutbox},
	{"notification_lease_owner", func(t *store.Task) any { return &t.NotificationLeaseOwner }, writeOutbox},
	{"notification_lease_expires_at", func(t *store.Task) any { return &t.NotificationLeaseExpiresAt }, writeOutbox},

	{"next_poll_at", func(t *store.Task) any { return &t.NextPollAt }, writeState},
	{"last_polled_at", func(t *store.Task) any { return &t.LastPolledAt }, writeState},
	{"last_poll_error", func(t *store.Task) any { return &t.LastPollError }, writeState},
	{"poll_attempt_count", func(t *store.Task) any { return &t.PollAttemptCount }, writeState},
	{"consecutive_poll_error_count", func(t *store.Task) any { return &t.ConsecutivePollErrorCount }, writeState},

	{"lease_owner", func(t *store.Task) any { return &t.LeaseOwner }, writeState},
	{"lease_expires_at", func(t *store.Task) any { return &t.LeaseExpiresAt }, writeState},

	{"cancel_requested_at", func(t *store.Task) any { return &t.CancelRequestedAt }, writeState},
	{"cancel_attempt_count", func(t *store.Task) any { return &t.CancelAttemptCount }, writeState},
	{"next_cancel_at", func(t *store.Task) any { return &t.NextCancelAt }, writeState},
	{"last_cancel_error", func(t *store.Task) any { return &t.LastCancelError }, writeState},

	{"completed_at", func(t *store.Task) any { return &t.CompletedAt }, writeState},
	{"created_at", func(t *store.Task) any { return &t.CreatedAt }, writeCreated},
	{"updated_at", func(t *store.Task) any { return &t.UpdatedAt }, writeUpdated},
}

// tokenColumns is mcp_oauth_tokens. PutToken writes the writeInsert
// columns; the lease columns (writeState) only the lease statements.
var tokenColumns = []column[store.OAuthToken]{
	{"connection_key", func(t *store.OAuthToken) any { return &t.ConnectionKey }, writeInsert},
	{"owner_user_id", func(t *store.OAuthToken) any { return &t.OwnerUserID }, writeInsert},
	{"fingerprint", func(t *store.OAuthToken) any { return &t.Fingerprint }, writeInsert},
	{"request_shape_hash", func(t *store.OAuthToken) any { return &t.RequestShapeHash }, writeInsert},
	{"access_token_enc", func(t *store.OAuthToken) any { return &t.AccessTokenEnc }, writeInsert},
	{"refresh_token_enc", func(t *store.OAuthToken) any { return &t.RefreshTokenEnc }, writeInsert},
	{"token_type", func(t *store.OAuthToken) any { return &t.TokenType }, writeInsert},
	{"expires_at", func(t *store.OAuthToken) any { return &t.ExpiresAt }, writeInsert},
	{"lease_owner", func(t *store.OAuthToken) any { return &t.LeaseOwner }, writeState},
	{"lease_expires_at", func(t *store.OAuthToken) any { return &t.LeaseExpiresAt }, writeState},
	{"updated_at", func(t *store.OAuthToken) any { return &t.UpdatedAt }, writeUpdated},
}

// connectionColumns is mcp_personal_connections. PutConnection writes the
// writeInsert columns; created_at is kept on conflict.
var connectionColumns = []column[store.PersonalConnection]{
	{"user_id", func(c *store.PersonalConnection) any { return &c.UserID }, writeInsert},
	{"name", func(c *store.PersonalConnection) any { return &c.Name }, writeInsert},
	{"runtime_name", func(c *store.PersonalConnection) any { return &c.RuntimeName }, writeInsert},
	{"definition", func(c *store.PersonalConnection) any { return &c.Definition }, writeInsert},
	{"created_at", func(c *store.PersonalConnection) any { return &c.CreatedAt }, writeCreated},
	{"updated_at", func(c *store.PersonalConnection) any { return &c.UpdatedAt }, writeUpdated},
}

// auditColumns is mcp_audit; every column but id is inserted.
var auditColumns = []column[store.AuditRecord]{
	{"id", func(r *store.AuditRecord) any { return &r.ID }, writeUpdated},
	{"recorded_at", func(r *store.AuditRecord) any { return &r.Time }, writeInsert},
	{"kind", func(r *store.AuditRecord) any { return &r.Kind }, writeInsert},
	{"user_id", func(r *store.AuditRecord) any { return &r.UserID }, writeInsert},
	{"thread_id", func(r *store.AuditRecord) any { return &r.ThreadID }, writeInsert},
	{"tool", func(r *store.AuditRecord) any { return &r.Tool }, writeInsert},
	{"server_name", func(r *store.AuditRecord) any { return &r.ServerName }, writeInsert},
	{"transport", func(r *store.AuditRecord) any { return &r.Transport }, writeInsert},
	{"outcome", func(r *store.AuditRecord) any { return &r.Outcome }, writeInsert},
	{"duration_ms", func(r *store.AuditRecord) any { return &r.DurationMS }, writeInsert},
	{"result_bytes", func(r *store.AuditRecord) any { return &r.ResultBytes }, writeInsert},
	{"request_id", func(r *store.AuditRecord) any { return &r.RequestID }, writeInsert},
	{"trace_id", func(r *store.AuditRecord) any { return &r.TraceID }, writeInsert},
	{"action", func(r *store.AuditRecord) any { return &r.Action }, writeInsert},
	{"arguments", func(r *store.AuditRecord) any { return &r.Arguments }, writeInsert},
	{"arguments_truncated", func(r *store.AuditRecord) any { return &r.ArgumentsTruncated }, writeInsert},
	{"changes", func(r *store.AuditRecord) any { return &r.Changes }, writeInsert},
	{"virtual_server", func(r *store.AuditRecord) any { return &r.VirtualServer }, writeInsert},
	{"policy", func(r *store.AuditRecord) any { return &r.Policy }, writeInsert},
}

// names lists the columns, comma separated.
func names[T any](cols []column[T]) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.name
	}
	return strings.Join(out, ", ")
}

// pick returns the columns whose write is one of ws.
func pick[T any](cols []column[T], ws ...write) []column[T] {
	var out []column[T]
	for _, c := range cols {
		for _, w := range ws {
			if c.write == w {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// setList renders "a = $n, b = $n+1, …" for cols, numbering from first.
func setList[T any](cols []column[T], first int) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = fmt.Sprintf("%s = $%d", c.name, first+i)
	}
	return strings.Join(out, ",\n\t")
}

// values returns the encoded values of cols in row.
func values[T any](d Dialect, cols []column[T], row *T) []any {
	out := make([]any, len(cols))
	for i, c := range cols {
		out[i] = d.encode(c.field(row))
	}
	return out
}

// notNull is a string field of a NOT NULL column: "" is stored as an
// empty string, not NULL.
type notNull string

// encode maps a field pointer to a driver value.
func (d Dialect) encode(field any) any {
	switch v := field.(type) {
	case *notNull:
		return string(*v)
	case *string:
		if *v == "" {
			return nil
		}
		return *v
	case *int:
		return int64(*v)
	case *int64:
		return *v
	case *float64:
		return *v
	case *bool:
		return *v
	case *json.RawMessage:
		if len(*v) == 0 {
			return nil
		}
		return string(*v)
	case *[]byte:
		if len(*v) == 0 {
			return nil
		}
		return *v
	case **time.Time:
		if *v == nil {
			return nil
		}
		return d.EncodeTime(**v)
	case *time.Time:
		if v.IsZero() {
			return nil
		}
		return d.EncodeTime(*v)
	default:
		panic(fmt.Sprintf("sqlstore: no encoding for %T", field))
	}
}

// dest is a sql.Scanner that decodes a driver value into a field: NULL is
// the zero value, times come as time.Time (PostgreSQL) or Unix milliseconds
// (SQLite) and are returned in UTC.
type dest struct{ field any }

// scanDests returns the scan destinations of cols in row.
func scanDests[T any](cols []column[T], row *T) []any {
	out := make([]any, len(cols))
	for i, c := range cols {
		out[i] = dest{c.field(row)}
	}
	return out
}

func (s dest) Scan(src any) error {
	switch f := s.field.(type) {
	case *notNull:
		return dest{(*string)(f)}.Scan(src)
	case *string:
		*f = ""
		switch v := src.(type) {
		case nil:
		case string:
			*f = v
		case []byte:
			*f = string(v)
		default:
			return fmt.Errorf("cannot scan %T into a string", src)
		}
	case *int:
		v, ok := src.(int64)
		if !ok {
			return fmt.Errorf("cannot scan %T into an int", src)
		}
		*f = int(v)
	case *int64:
		v, ok := src.(int64)
		if !ok {
			return fmt.Errorf("cannot scan %T into an int64", src)
		}
		*f = v
	case *float64:
		switch v := src.(type) {
		case float64:
			*f = v
		case int64:
			*f = float64(v)
		default:
			return fmt.Errorf("cannot scan %T into a float64", src)
		}
	case *bool:
		switch v := src.(type) {
		case bool:
			*f = v
		case int64:
			*f = v != 0
		default:
			return fmt.Errorf("cannot scan %T into a bool", src)
		}
	case *json.RawMessage:
		b, err := bytesOf(src)
		*f = json.RawMessage(b)
		return err
	case *[]byte:
		b, err := bytesOf(src)
		*f = b
		return err
	case **time.Time:
		*f = nil
		if src == nil {
			return nil
		}
		t, err := timeOf(src)
		*f = &t
		return err
	case *time.Time:
		t, err := timeOf(src)
		*f = t
		return err
	default:
		return fmt.Errorf("no decoding for %T", s.field)
	}
	return nil
}

// bytesOf copies a text or binary value (the driver may reuse its buffer);
// NULL is nil.
func bytesOf(src any) ([]byte, error) {
	switch v := src.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(v), nil
	case []byte:
		return append([]byte{}, v...), nil
	default:
		return nil, fmt.Errorf("cannot scan %T into bytes", src)
	}
}

func timeOf(src any) (time.Time, error) {
	switch v := src.(type) {
	case time.Time:
		return v.UTC(), nil
	case int64:
		return time.UnixMilli(v).UTC(), nil
	default:
		return time.Time{}, fmt.Errorf("cannot scan %T into a time", src)
	}
}

// pinColumns is mcp_tool_pins. PutPin writes the writeInsert columns;
// created_at is kept on conflict.
var pinColumns = []column[store.ToolPin]{
	{"server_id", func(p *store.ToolPin) any { return &p.Server }, writeInsert},
	{"tool_name", func(p *store.ToolPin) any { return &p.Tool }, writeInsert},
	{"owner", func(p *store.ToolPin) any { return (*notNull)(&p.Owner) }, writeInsert},
	{"policy", func(p *store.ToolPin) any { return &p.Policy }, writeInsert},
	{"state", func(p *store.ToolPin) any { return &p.State }, writeInsert},
	{"approved_digest", func(p *store.ToolPin) any { return &p.ApprovedDigest }, writeInsert},
	{"pending_digest", func(p *store.ToolPin) any { return &p.PendingDigest }, writeInsert},
	{"flags", func(p *store.ToolPin) any { return &p.Flags }, writeInsert},
	{"generation", func(p *store.ToolPin) any { return &p.Generation }, writeInsert},
	{"decided_by", func(p *store.ToolPin) any { return &p.DecidedBy }, writeInsert},
	{"decided_at", func(p *store.ToolPin) any { return &p.DecidedAt }, writeInsert},
	{"created_at", func(p *store.ToolPin) any { return &p.CreatedAt }, writeCreated},
	{"updated_at", func(p *store.ToolPin) any { return &p.UpdatedAt }, writeUpdated},
}

// definitionColumns is mcp_tool_definitions.
var definitionColumns = []column[store.ToolDefinition]{
	{"server_id", func(d *store.ToolDefinition) any { return &d.Server }, writeInsert},
	{"tool_name", func(d *store.ToolDefinition) any { return &d.Tool }, writeInsert},
	{"digest", func(d *store.ToolDefinition) any { return &d.Digest }, writeInsert},
	{"definition", func(d *store.ToolDefinition) any { return &d.Definition }, writeInsert},
	{"first_generation", func(d *store.ToolDefinition) any { return &d.FirstGeneration }, writeInsert},
	{"last_generation", func(d *store.ToolDefinition) any { return &d.LastGeneration }, writeInsert},
	{"first_seen_at", func(d *store.ToolDefinition) any { return &d.FirstSeenAt }, writeCreated},
	{"last_seen_at", func(d *store.ToolDefinition) any { return &d.LastSeenAt }, writeUpdated},
}
