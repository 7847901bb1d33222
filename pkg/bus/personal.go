package bus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"time"
)

// Names.InternalPersonal returns one user's personal MCP connections (the
// api service answers it from mcp_personal_connections). Discovery and
// toolcall ask it with the caller's user_id to add that user's servers to
// their catalog and to route calls to them; nobody else's are returned.
//
// Request PersonalServersRequest, reply PersonalServersReply. Errors:
// invalid_request for an empty user_id, unavailable when the api has no
// database.
//
// Names.PersonalEvents(user) announces that the user's personal
// connections changed. The body is PersonalServersRequest ({"user_id"}, the
// exact id). Discovery and toolcall drop what they cached for that user.

// PersonalRuntimePrefix starts every personal server's runtime name. The
// api refuses deployment servers whose names look like runtime names, so the
// two never collide.
const PersonalRuntimePrefix = "p_"

// personalRuntimeHexChars is how many hex digits of the hash a runtime name keeps.
const personalRuntimeHexChars = 12

// PersonalRuntimeNamePattern matches a personal server's runtime name.
var PersonalRuntimeNamePattern = regexp.MustCompile(`^p_[0-9a-f]{12}$`)

// PersonalServersRequest is the body of mcpbus.internal.personal.
type PersonalServersRequest struct {
	UserID string `json:"user_id"`
}

// PersonalServer is one personal connection as the runtime sees it.
type PersonalServer struct {
	// Name is what the user calls it (unique per user).
	Name string `json:"name"`
	// RuntimeName is the server name to use in the catalog, in tool name
	// prefixes, in task rows and as the OAuth token row key
	// (mcp_oauth_tokens.connection_key, with owner_user_id = the user). It
	// derives from the whole definition (PersonalRuntimeName), so an edit
	// gives a new runtime name.
	RuntimeName string `json:"runtime_name"`
	// Definition is the server entry exactly as in extensions_config.json,
	// unmasked (it carries the user's secrets: never log it). Personal
	// definitions never contain "$VAR" strings, so expanding them is a no-op.
	Definition json.RawMessage `json:"definition"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// PersonalServersReply is the reply of mcpbus.internal.personal: the user's
// connections ordered by name.
type PersonalServersReply struct {
	UserID  string           `json:"user_id"`
	Servers []PersonalServer `json:"servers"`
}

// ExtensionsJSON renders the servers as an extensions_config.json document
// keyed by runtime name ({"mcpServers": {runtime_name: definition}}), ready
// for config.ParseExtensions.
func (r PersonalServersReply) ExtensionsJSON() ([]byte, error) {
	servers := make(map[string]json.RawMessage, len(r.Servers))
	for _, s := range r.Servers {
		servers[s.RuntimeName] = s.Definition
	}
	return json.Marshal(map[string]any{"mcpServers": servers})
}

// PersonalRuntimeName derives the runtime name of a personal connection:
// "p_" + the first 12 hex digits of SHA-256(user_id NUL name NUL canonical
// definition), where the canonical definition is the JSON with object keys
// sorted, no insignificant whitespace and no HTML escaping (numbers kept as
// written). Equal definitions give equal names whatever their formatting.
func PersonalRuntimeName(userID, name string, definition json.RawMessage) (string, error) {
	canon, err := canonicalJSON(definition)
	if err != nil {
		return "", fmt.Errorf("personal connection %q: %w", name, err)
	}
	h := sha256.New()
	h.Write([]byte(userID))
	h.Write([]byte{0})
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(canon)
	return PersonalRuntimePrefix + hex.EncodeToString(h.Sum(nil))[:personalRuntimeHexChars], nil
}

// canonicalJSON re-encodes a JSON value with sorted keys.
func canonicalJSON(raw json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("definition is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		// Decode reads one value: text after it would otherwise be
		// ignored, and two different definitions would share a name.
		return nil, errors.New("definition is not valid JSON: data after the top-level value")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(x); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1)
	}
	return nil
}
