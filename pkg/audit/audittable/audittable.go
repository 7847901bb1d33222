// Package audittable adapts the store's mcp_audit table (store.AuditStore)
// to the audit writer's audit.Table, for audit.database: true. It is the
// only package that knows both the audit record and the table row.
package audittable

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// Table writes audit records to a store.AuditStore.
type Table struct {
	Store store.AuditStore
}

var _ audit.Table = Table{}

// Of returns the table of db, or nil when db is nil or has no SQL backend.
func Of(db store.Store) audit.Table {
	if db == nil || db.Backend() == store.BackendMemory {
		return nil
	}
	return Table{Store: db.Audit()}
}

// InsertRecords implements audit.Table.
func (t Table) InsertRecords(ctx context.Context, recs []audit.Record) error {
	rows := make([]store.AuditRecord, len(recs))
	for i, r := range recs {
		rows[i] = Row(r)
	}
	if err := t.Store.InsertAuditRecords(ctx, store.InsertAuditRecordsParams{Records: rows}); err != nil {
		return fmt.Errorf("audit table: %w", err)
	}
	return nil
}

// Prune implements audit.Table.
func (t Table) Prune(ctx context.Context, before time.Time) (int, error) {
	n, err := t.Store.PruneAuditRecords(ctx, store.PruneAuditRecordsParams{Before: before})
	if err != nil {
		return 0, fmt.Errorf("audit table: %w", err)
	}
	return n, nil
}

// Row is the table row of r.
func Row(r audit.Record) store.AuditRecord {
	row := store.AuditRecord{Time: r.Time, Kind: r.Kind, UserID: r.User, ThreadID: r.Thread, Tool: r.Tool,
		ServerName: r.Server, Transport: r.Transport, Outcome: r.Outcome, DurationMS: r.DurationMS,
		ResultBytes: r.ResultBytes, RequestID: r.RequestID, TraceID: r.TraceID, Action: r.Action,
		Arguments: r.Arguments, ArgumentsTruncated: r.ArgumentsTruncated, VirtualServer: r.VirtualServer, Policy: r.Policy}
	if len(r.Changes) > 0 {
		row.Changes, _ = json.Marshal(r.Changes) // always encodes: strings only
	}
	return row
}
