package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// PersonalConnection is one row of mcp_personal_connections: an MCP server a
// user defined for themself. RuntimeName derives from the definition (the
// caller computes it).
type PersonalConnection struct {
	UserID      string
	Name        string
	RuntimeName string
	Definition  json.RawMessage // the server entry, as in extensions_config.json
	CreatedAt   time.Time       // set by the store on first insert
	UpdatedAt   time.Time       // set by the store on every write
}

// Validate checks what every backend requires of PutConnection.
func (c *PersonalConnection) Validate() error {
	switch {
	case c.UserID == "":
		return fmt.Errorf("%w: personal connection: user_id must not be empty", ErrInvalid)
	case c.Name == "":
		return fmt.Errorf("%w: personal connection: name must not be empty", ErrInvalid)
	case c.RuntimeName == "":
		return fmt.Errorf("%w: personal connection: runtime_name must not be empty", ErrInvalid)
	case len(c.Definition) == 0 || !json.Valid(c.Definition):
		return fmt.Errorf("%w: personal connection: definition must be valid JSON", ErrInvalid)
	}
	return nil
}
