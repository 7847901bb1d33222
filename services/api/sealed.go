package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/services/api/internal/configedit"
)

// sealedDefinition is how a personal connection's definition is stored:
// the whole entry sealed with AES-256-GCM under the credentials key, bound
// to its owner and name, so no header, env or OAuth secret sits in a
// plain-text column.
type sealedDefinition struct {
	Sealed []byte `json:"sealed"`
}

// sealedConnections wraps the connection store: Put seals, Get and List
// open. Without a sealer (no credentials key) a definition that carries a
// secret value is refused rather than stored in plain text; one without
// secrets is stored as it is.
type sealedConnections struct {
	store.ConnectionStore
	sealer *crypto.Sealer
}

func definitionAD(user, name string) []byte {
	return []byte("mcp_personal_connections\x00" + user + "\x00" + name)
}

// hasSecretValues reports whether masking would change the entry.
func hasSecretValues(def json.RawMessage) (bool, error) {
	masked, err := configedit.MaskServerEntry(def)
	if err != nil {
		return false, err
	}
	var a, b any
	if json.Unmarshal(def, &a) != nil || json.Unmarshal(masked, &b) != nil {
		return false, fmt.Errorf("definition is not a JSON object")
	}
	ca, _ := json.Marshal(a)
	cb, _ := json.Marshal(b)
	return !bytes.Equal(ca, cb), nil
}

// PutConnection returns the row as stored, with the plain definition.
func (c sealedConnections) PutConnection(ctx context.Context, p store.PutConnectionParams) (*store.PersonalConnection, error) {
	pc := &p.Connection
	plain := pc.Definition
	if c.sealer == nil {
		secret, err := hasSecretValues(plain)
		if err != nil {
			return nil, bus.Wrap(bus.CodeInvalidRequest, err, "the server definition is not valid JSON")
		}
		if secret {
			return nil, bus.Errorf(bus.CodeConfigError, "personal connection '%s' carries secret values (headers, env, OAuth secrets, URL userinfo or query strings, or tokens in args), which are stored encrypted: set %s on the api service (mcpbus keygen prints one)", pc.Name, config.EnvCredentialsKey)
		}
		return c.ConnectionStore.PutConnection(ctx, p)
	}
	ct, err := c.sealer.Seal(plain, definitionAD(pc.UserID, pc.Name))
	if err != nil {
		return nil, fmt.Errorf("seal personal connection: %w", err)
	}
	sealed, _ := json.Marshal(sealedDefinition{Sealed: ct})
	p.Connection.Definition = sealed
	row, err := c.ConnectionStore.PutConnection(ctx, p)
	if err != nil {
		return nil, err
	}
	row.Definition = plain
	return row, nil
}

func (c sealedConnections) open(pc *store.PersonalConnection) error {
	var sd sealedDefinition
	if json.Unmarshal(pc.Definition, &sd) != nil || sd.Sealed == nil {
		return nil // stored without secrets
	}
	if c.sealer == nil {
		return bus.Errorf(bus.CodeConfigError, "personal connection '%s' is stored encrypted and %s is not set on the api service", pc.Name, config.EnvCredentialsKey)
	}
	plain, err := c.sealer.Open(sd.Sealed, definitionAD(pc.UserID, pc.Name))
	if err != nil {
		return bus.Errorf(bus.CodeConfigError, "personal connection '%s' cannot be decrypted: every api instance needs the same %s", pc.Name, config.EnvCredentialsKey)
	}
	pc.Definition = plain
	return nil
}

func (c sealedConnections) GetConnection(ctx context.Context, p store.ConnectionParams) (*store.PersonalConnection, error) {
	pc, err := c.ConnectionStore.GetConnection(ctx, p)
	if err != nil {
		return nil, err
	}
	return pc, c.open(pc)
}

func (c sealedConnections) ListConnections(ctx context.Context, p store.ListConnectionsParams) ([]store.PersonalConnection, error) {
	rows, err := c.ConnectionStore.ListConnections(ctx, p)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if err := c.open(&rows[i]); err != nil {
			return nil, err
		}
	}
	return rows, nil
}
