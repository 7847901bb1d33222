package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// connectionStatements are the mcp_personal_connections statements of one
// dialect.
type connectionStatements struct {
	list, get, put, delete string
}

// connectionPutColumns are what PutConnection writes (after $1 now).
var connectionPutColumns = pick(connectionColumns, writeInsert)

func connectionSQL(d Dialect) connectionStatements {
	cols := names(connectionColumns)
	vals := make([]string, len(connectionPutColumns))
	for i := range connectionPutColumns {
		vals[i] = fmt.Sprintf("$%d", i+2)
	}
	return connectionStatements{
		list: "SELECT " + cols + " FROM mcp_personal_connections WHERE user_id = $1 ORDER BY name",
		get:  "SELECT " + cols + " FROM mcp_personal_connections WHERE user_id = $1 AND name = $2",
		put: d.render(`
INSERT INTO mcp_personal_connections (` + names(connectionPutColumns) + `, created_at, updated_at)
VALUES (` + strings.Join(vals, ", ") + `, {now}, {now})
ON CONFLICT (user_id, name) DO UPDATE SET
	runtime_name = excluded.runtime_name,
	definition = excluded.definition,
	updated_at = excluded.updated_at
RETURNING ` + cols),
		delete: "DELETE FROM mcp_personal_connections WHERE user_id = $1 AND name = $2",
	}
}

// ListConnections implements store.ConnectionStore.
func (s *Store) ListConnections(ctx context.Context, p store.ListConnectionsParams) ([]store.PersonalConnection, error) {
	conns, err := queryRows(ctx, s.db, connectionColumns, s.q.connections.list, p.UserID)
	if err != nil {
		return nil, s.translate("list connections", err)
	}
	return conns, nil
}

// GetConnection implements store.ConnectionStore.
func (s *Store) GetConnection(ctx context.Context, p store.ConnectionParams) (*store.PersonalConnection, error) {
	c, err := queryRow(ctx, s.db, connectionColumns, s.q.connections.get, p.UserID, p.Name)
	if err != nil {
		return nil, s.translate("get connection", err)
	}
	return c, nil
}

// PutConnection implements store.ConnectionStore.
func (s *Store) PutConnection(ctx context.Context, p store.PutConnectionParams) (*store.PersonalConnection, error) {
	if err := p.Connection.Validate(); err != nil {
		return nil, err
	}
	args := append([]any{s.d.now(p.Now)}, values(s.d, connectionPutColumns, &p.Connection)...)
	c, err := queryRow(ctx, s.db, connectionColumns, s.q.connections.put, args...)
	if err != nil {
		return nil, s.translate("put connection", err)
	}
	return c, nil
}

// DeleteConnection implements store.ConnectionStore.
func (s *Store) DeleteConnection(ctx context.Context, p store.ConnectionParams) error {
	n, err := exec(ctx, s.db, s.q.connections.delete, p.UserID, p.Name)
	if err != nil {
		return s.translate("delete connection", err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s: delete connection %s/%s: %w", s.d.Backend, p.UserID, p.Name, store.ErrNotFound)
	}
	return nil
}
