package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/internal/sqlschema"
)

const listConnectionsSQL = `SELECT ` + sqlschema.ConnectionColumns + ` FROM mcp_personal_connections
WHERE user_id = $1 ORDER BY name`

const getConnectionSQL = `SELECT ` + sqlschema.ConnectionColumns + ` FROM mcp_personal_connections
WHERE user_id = $1 AND name = $2`

const putConnectionSQL = `
INSERT INTO mcp_personal_connections (user_id, name, runtime_name, definition, created_at, updated_at)
VALUES ($1, $2, $3, $4, now(), now())
ON CONFLICT (user_id, name) DO UPDATE SET
	runtime_name = EXCLUDED.runtime_name,
	definition = EXCLUDED.definition,
	updated_at = EXCLUDED.updated_at
RETURNING ` + sqlschema.ConnectionColumns

const deleteConnectionSQL = `DELETE FROM mcp_personal_connections WHERE user_id = $1 AND name = $2`

type connectionStore struct {
	pool *pgxpool.Pool
}

var _ store.ConnectionStore = (*connectionStore)(nil)

func (s *connectionStore) ListConnections(ctx context.Context, userID string) ([]store.PersonalConnection, error) {
	rows, err := s.pool.Query(ctx, listConnectionsSQL, userID)
	if err != nil {
		return nil, translate("list connections", err)
	}
	conns, err := pgx.CollectRows(rows, scanConnection)
	if err != nil {
		return nil, translate("list connections", err)
	}
	if conns == nil {
		conns = []store.PersonalConnection{}
	}
	return conns, nil
}

func (s *connectionStore) GetConnection(ctx context.Context, userID, name string) (*store.PersonalConnection, error) {
	c, err := collectOneConnection(s.pool.Query(ctx, getConnectionSQL, userID, name))
	if err != nil {
		return nil, translate("get connection", err)
	}
	return &c, nil
}

func (s *connectionStore) PutConnection(ctx context.Context, c *store.PersonalConnection) error {
	if err := c.Validate(); err != nil {
		return err
	}
	got, err := collectOneConnection(s.pool.Query(ctx, putConnectionSQL,
		c.UserID, c.Name, c.RuntimeName, []byte(c.Definition)))
	if err != nil {
		return translate("put connection", err)
	}
	*c = got
	return nil
}

func (s *connectionStore) DeleteConnection(ctx context.Context, userID, name string) error {
	tag, err := s.pool.Exec(ctx, deleteConnectionSQL, userID, name)
	if err != nil {
		return translate("delete connection", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: postgres: delete connection %s/%s: %w", userID, name, store.ErrNotFound)
	}
	return nil
}

func scanConnection(row pgx.CollectableRow) (store.PersonalConnection, error) {
	var (
		c   store.PersonalConnection
		def []byte
	)
	if err := row.Scan(&c.UserID, &c.Name, &c.RuntimeName, &def, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return store.PersonalConnection{}, err
	}
	c.Definition = rawJSON(def)
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return c, nil
}

func collectOneConnection(rows pgx.Rows, err error) (store.PersonalConnection, error) {
	if err != nil {
		return store.PersonalConnection{}, err
	}
	return pgx.CollectExactlyOneRow(rows, scanConnection)
}
