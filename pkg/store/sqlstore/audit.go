package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// auditStatements are the mcp_audit statements of one dialect.
type auditStatements struct {
	insert, list, prune string
}

func auditSQL(d Dialect) auditStatements {
	ins := pick(auditColumns, writeInsert)
	ph := make([]string, len(ins))
	for i := range ins {
		ph[i] = fmt.Sprintf("$%d", i+1)
		if ins[i].name == "recorded_at" {
			ph[i] = d.timeParam(i + 1)
		}
	}
	return auditStatements{
		insert: "INSERT INTO mcp_audit (" + names(ins) + ") VALUES (" + strings.Join(ph, ", ") + ")",
		// list: $1 kind, $2 user, $3 tool ('' for any), $4 since or NULL, $5 limit.
		list: fmt.Sprintf(`SELECT %s FROM mcp_audit
WHERE (CAST($1 AS TEXT) = '' OR kind = $1)
	AND (CAST($2 AS TEXT) = '' OR user_id = $2)
	AND (CAST($3 AS TEXT) = '' OR tool = $3)
	AND (%s IS NULL OR recorded_at >= %s)
ORDER BY recorded_at DESC, id DESC
LIMIT $5`, names(auditColumns), d.timeParam(4), d.timeParam(4)),
		prune: fmt.Sprintf("DELETE FROM mcp_audit WHERE recorded_at < %s", d.timeParam(1)),
	}
}

// InsertAuditRecords implements store.AuditStore.
func (s *Store) InsertAuditRecords(ctx context.Context, p store.InsertAuditRecordsParams) error {
	for i, r := range p.Records {
		if r.Kind == "" || r.Time.IsZero() {
			return fmt.Errorf("%w: insert audit records: record %d needs a kind and a time", store.ErrInvalid, i)
		}
	}
	if len(p.Records) == 0 {
		return nil
	}
	ins := pick(auditColumns, writeInsert)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, s.q.audit.insert)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, r := range p.Records {
			if _, err := stmt.ExecContext(ctx, values(s.d, ins, &r)...); err != nil {
				return err
			}
		}
		return nil
	})
	return s.translate("insert audit records", err)
}

// ListAuditRecords implements store.AuditStore.
func (s *Store) ListAuditRecords(ctx context.Context, p store.ListAuditRecordsParams) ([]store.AuditRecord, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("%w: list audit records: limit must be at least 1, got %d", store.ErrInvalid, p.Limit)
	}
	rows, err := queryRows(ctx, s.db, auditColumns, s.q.audit.list, p.Kind, p.UserID, p.Tool, s.d.encode(&p.Since), p.Limit)
	if err != nil {
		return nil, s.translate("list audit records", err)
	}
	slices.Reverse(rows)
	return rows, nil
}

// PruneAuditRecords implements store.AuditStore.
func (s *Store) PruneAuditRecords(ctx context.Context, p store.PruneAuditRecordsParams) (int, error) {
	if p.Before.IsZero() {
		return 0, fmt.Errorf("%w: prune audit records: a cutoff is required", store.ErrInvalid)
	}
	n, err := exec(ctx, s.db, s.q.audit.prune, s.d.EncodeTime(p.Before))
	if err != nil {
		return 0, s.translate("prune audit records", err)
	}
	return int(n), nil
}
