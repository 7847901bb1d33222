package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/internal/sqlschema"
)

const listConnectionsSQL = `SELECT ` + sqlschema.ConnectionColumns + ` FROM mcp_personal_connections
WHERE user_id = $1 ORDER BY name`

const getConnectionSQL = `SELECT ` + sqlschema.ConnectionColumns + ` FROM mcp_personal_connections
WHERE user_id = $1 AND name = $2`

const putConnectionSQL = `
INSERT INTO mcp_personal_connections (user_id, name, runtime_name, definition, created_at, updated_at)
VALUES ($1, $2, $3, $4, ` + nowMS + `, ` + nowMS + `)
ON CONFLICT (user_id, name) DO UPDATE SET
	runtime_name = excluded.runtime_name,
	definition = excluded.definition,
	updated_at = excluded.updated_at
RETURNING ` + sqlschema.ConnectionColumns

const deleteConnectionSQL = `DELETE FROM mcp_personal_connections WHERE user_id = $1 AND name = $2`

type connectionStore struct {
	db *sql.DB
}

var _ store.ConnectionStore = (*connectionStore)(nil)

func (s *connectionStore) ListConnections(ctx context.Context, userID string) ([]store.PersonalConnection, error) {
	conns, err := queryConnections(ctx, s.db, listConnectionsSQL, userID)
	if err != nil {
		return nil, translate("list connections", err)
	}
	return conns, nil
}

func (s *connectionStore) GetConnection(ctx context.Context, userID, name string) (*store.PersonalConnection, error) {
	conns, err := queryConnections(ctx, s.db, getConnectionSQL, userID, name)
	if err == nil && len(conns) == 0 {
		err = sql.ErrNoRows
	}
	if err != nil {
		return nil, translate("get connection", err)
	}
	return &conns[0], nil
}

func (s *connectionStore) PutConnection(ctx context.Context, c *store.PersonalConnection) error {
	if err := c.Validate(); err != nil {
		return err
	}
	conns, err := queryConnections(ctx, s.db, putConnectionSQL, c.UserID, c.Name, c.RuntimeName, string(c.Definition))
	if err == nil && len(conns) == 0 {
		err = sql.ErrNoRows
	}
	if err != nil {
		return translate("put connection", err)
	}
	*c = conns[0]
	return nil
}

func (s *connectionStore) DeleteConnection(ctx context.Context, userID, name string) error {
	res, err := s.db.ExecContext(ctx, deleteConnectionSQL, userID, name)
	if err != nil {
		return translate("delete connection", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return translate("delete connection", err)
	}
	if n == 0 {
		return fmt.Errorf("store: sqlite: delete connection %s/%s: %w", userID, name, store.ErrNotFound)
	}
	return nil
}

func queryConnections(ctx context.Context, q querier, query string, args ...any) ([]store.PersonalConnection, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	conns := []store.PersonalConnection{}
	for rows.Next() {
		var (
			c                store.PersonalConnection
			def              string
			created, updated int64
		)
		if err := rows.Scan(&c.UserID, &c.Name, &c.RuntimeName, &def, &created, &updated); err != nil {
			return nil, err
		}
		c.Definition = []byte(def)
		c.CreatedAt, c.UpdatedAt = fromMillis(created), fromMillis(updated)
		conns = append(conns, c)
	}
	return conns, rows.Err()
}
