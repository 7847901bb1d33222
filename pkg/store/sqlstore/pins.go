package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// pinStatements are the mcp_tool_pins and mcp_tool_definitions statements
// of one dialect.
type pinStatements struct {
	recordDef, getDef, listServer, put, list, approve, reject, exists string
}

var pinPutColumns = pick(pinColumns, writeInsert)

func pinSQL(d Dialect) pinStatements {
	cols := names(pinColumns)
	vals := make([]string, len(pinPutColumns))
	sets := make([]string, 0, len(pinPutColumns))
	for i, c := range pinPutColumns {
		vals[i] = fmt.Sprintf("$%d", i+2)
		if c.name == "decided_at" {
			vals[i] = d.timeParam(i + 2)
		}
		if c.name != "server_id" && c.name != "tool_name" {
			sets = append(sets, c.name+" = excluded."+c.name)
		}
	}
	decided := `decided_by = $5, decided_at = {now}, updated_at = {now}
WHERE server_id = $2 AND tool_name = $3 AND pending_digest = $4
	AND state IN ('pending', 'blocked', 'rejected')
RETURNING ` + cols
	return pinStatements{
		// $1 now, $2 server, $3 tool, $4 digest, $5 definition, $6 generation.
		recordDef: d.render(`
INSERT INTO mcp_tool_definitions (` + names(definitionColumns) + `)
VALUES ($2, $3, $4, $5, $6, $6, {now}, {now})
ON CONFLICT (server_id, tool_name, digest) DO UPDATE SET
	last_generation = CASE WHEN excluded.last_generation > mcp_tool_definitions.last_generation
		THEN excluded.last_generation ELSE mcp_tool_definitions.last_generation END,
	last_seen_at = excluded.last_seen_at`),
		getDef:     "SELECT " + names(definitionColumns) + " FROM mcp_tool_definitions WHERE server_id = $1 AND tool_name = $2 AND digest = $3",
		listServer: "SELECT " + cols + " FROM mcp_tool_pins WHERE server_id = $1 ORDER BY tool_name",
		put: d.render(`
INSERT INTO mcp_tool_pins (` + names(pinPutColumns) + `, created_at, updated_at)
VALUES (` + strings.Join(vals, ", ") + `, {now}, {now})
ON CONFLICT (server_id, tool_name) DO UPDATE SET
	` + strings.Join(sets, ",\n\t") + `,
	updated_at = excluded.updated_at
RETURNING ` + cols),
		list: "SELECT " + cols + ` FROM mcp_tool_pins
WHERE (CAST($1 AS TEXT) = '' OR state = $1)
ORDER BY updated_at DESC, server_id, tool_name
LIMIT $2`,
		approve: d.render(`UPDATE mcp_tool_pins SET state = 'approved', approved_digest = pending_digest,
	pending_digest = NULL, flags = NULL, ` + decided),
		reject: d.render(`UPDATE mcp_tool_pins SET state = 'rejected', ` + decided),
		exists: "SELECT " + cols + " FROM mcp_tool_pins WHERE server_id = $1 AND tool_name = $2",
	}
}

// RecordDefinitions implements store.PinStore.
func (s *Store) RecordDefinitions(ctx context.Context, p store.RecordDefinitionsParams) error {
	if len(p.Definitions) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, def := range p.Definitions {
			if def.Server == "" || def.Tool == "" || def.Digest == "" {
				return fmt.Errorf("%w: record definitions: server, tool and digest must not be empty", store.ErrInvalid)
			}
			if _, err := tx.ExecContext(ctx, s.q.pins.recordDef, s.d.now(p.Now), def.Server, def.Tool, def.Digest,
				string(def.Definition), p.Generation); err != nil {
				return err
			}
		}
		return nil
	})
	return s.translate("record tool definitions", err)
}

// GetDefinition implements store.PinStore.
func (s *Store) GetDefinition(ctx context.Context, p store.DefinitionParams) (*store.ToolDefinition, error) {
	d, err := queryRow(ctx, s.db, definitionColumns, s.q.pins.getDef, p.Server, p.Tool, p.Digest)
	if err != nil {
		return nil, s.translate("get tool definition", err)
	}
	return d, nil
}

// ListServerPins implements store.PinStore.
func (s *Store) ListServerPins(ctx context.Context, p store.ServerPinsParams) ([]store.ToolPin, error) {
	pins, err := queryRows(ctx, s.db, pinColumns, s.q.pins.listServer, p.Server)
	if err != nil {
		return nil, s.translate("list server pins", err)
	}
	return pins, nil
}

// PutPin implements store.PinStore.
func (s *Store) PutPin(ctx context.Context, p store.PutPinParams) (*store.ToolPin, error) {
	if err := p.Pin.Validate(); err != nil {
		return nil, err
	}
	args := append([]any{s.d.now(p.Now)}, values(s.d, pinPutColumns, &p.Pin)...)
	pin, err := queryRow(ctx, s.db, pinColumns, s.q.pins.put, args...)
	if err != nil {
		return nil, s.translate("put tool pin", err)
	}
	return pin, nil
}

// ListPins implements store.PinStore.
func (s *Store) ListPins(ctx context.Context, p store.ListPinsParams) ([]store.ToolPin, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultListLimit
	}
	pins, err := queryRows(ctx, s.db, pinColumns, s.q.pins.list, p.State, limit)
	if err != nil {
		return nil, s.translate("list tool pins", err)
	}
	return pins, nil
}

// DecidePin implements store.PinStore.
func (s *Store) DecidePin(ctx context.Context, p store.DecidePinParams) (*store.ToolPin, error) {
	if p.Server == "" || p.Tool == "" || p.Digest == "" || p.By == "" {
		return nil, fmt.Errorf("%w: decide tool pin: server, tool, digest and by must not be empty", store.ErrInvalid)
	}
	q := s.q.pins.reject
	if p.Approve {
		q = s.q.pins.approve
	}
	pin, err := queryRow(ctx, s.db, pinColumns, q, s.d.now(p.Now), p.Server, p.Tool, p.Digest, p.By)
	if err == nil {
		return pin, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, s.translate("decide tool pin", err)
	}
	if _, err := queryRow(ctx, s.db, pinColumns, s.q.pins.exists, p.Server, p.Tool); err != nil {
		return nil, s.translate("decide tool pin", err)
	}
	return nil, fmt.Errorf("store: %s: decide tool pin %s/%s: digest %s is not the one waiting: %w",
		s.d.Backend, p.Server, p.Tool, p.Digest, store.ErrConflict)
}
