package config

import (
	"encoding/json"
	"fmt"
)

// EditErrorKind says why an edit of the extensions config was refused.
type EditErrorKind int

// Kinds of EditError; the REST API maps them to 400, 422 and 404.
const (
	// EditInvalid: a merge problem, such as "***" for a secret that has no
	// stored value.
	EditInvalid EditErrorKind = iota + 1
	// EditSchema: the body or the resulting config does not have the
	// schema of extensions_config.json.
	EditSchema
	// EditNotFound: the edit names a server that does not exist.
	EditNotFound
)

// EditError is a refused edit. Message names the server and the key, never
// a value.
type EditError struct {
	Kind    EditErrorKind
	Server  string
	Field   string
	Message string
}

func (e *EditError) Error() string { return e.Message }

func editErrorf(kind EditErrorKind, server, field, format string, args ...any) *EditError {
	return &EditError{Kind: kind, Server: server, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ReplaceServers applies a PUT of the server set to an extensions file's
// bytes (empty when the file does not exist) and returns the new file,
// indented. servers is the body's mcp_servers object.
//
//   - Servers missing from servers are deleted; the rest keep the body's order.
//   - For a server that already exists (reference §1.5): an env or headers
//     value "***" restores the stored value (a new key is refused);
//     oauth.client_secret and oauth.refresh_token keep the stored value when
//     null, absent or "***", are cleared by "", replaced otherwise;
//     oauth.extra_token_params and user_auth.users values "***" restore the
//     stored value; in url and oauth.token_url a "***" userinfo, query or
//     fragment restores the stored part while the scheme and host are
//     unchanged; an args element equal to the masked form of the stored
//     one at the same position restores it; an omitted routing or tools
//     keeps the stored one; untyped
//     keys merge recursively: a masked sensitive key restores the stored
//     value (a new one is refused) and stored keys absent from the body are
//     kept.
//   - A new server is stored as sent, but any masked placeholder where a
//     secret would be ("***", or an oauth secret "***") is refused.
//   - Top-level keys other than mcpServers are kept as written.
//
// Errors are *EditError.
func ReplaceServers(data []byte, servers json.RawMessage) ([]byte, error) {
	top := newObject()
	if len(data) > 0 {
		t, err := decodeTop(data)
		if err != nil {
			return nil, editErrorf(EditSchema, "", "", "the stored config cannot be edited: %v", err)
		}
		top = t
	}
	stored, err := serversOf(data)
	if err != nil {
		return nil, editErrorf(EditSchema, "", "mcpServers", "the stored config cannot be edited: %v", err)
	}
	bv, err := decodeOrdered(servers)
	if err != nil {
		return nil, editErrorf(EditSchema, "", "mcp_servers", "mcp_servers is not valid JSON: %v", err)
	}
	body, ok := bv.(*object)
	if !ok {
		return nil, editErrorf(EditSchema, "", "mcp_servers", "mcp_servers must be a JSON object, got %s", kindOf(bv))
	}
	next := newObject()
	for _, name := range body.keys {
		var prev *object
		if sv, ok := stored.get(name); ok {
			prev, _ = sv.(*object)
		}
		merged, err := mergeServer(name, prev, body.vals[name])
		if err != nil {
			return nil, err
		}
		next.set(name, merged)
	}
	top.set("mcpServers", next)
	return encodeOrdered(top, true)
}

// MergeServerEntry merges one server entry sent by a client with the stored
// one (nil for a new server) by the rules of ReplaceServers, and returns it
// compact. Errors are *EditError.
func MergeServerEntry(name string, stored, body json.RawMessage) (json.RawMessage, error) {
	var prev *object
	if len(stored) > 0 {
		v, err := decodeOrdered(stored)
		if err != nil {
			return nil, editErrorf(EditSchema, name, "", "the stored definition of MCP server '%s' is not valid JSON", name)
		}
		prev, _ = v.(*object)
	}
	bv, err := decodeOrdered(body)
	if err != nil {
		return nil, editErrorf(EditSchema, name, "", "MCP server '%s' is not valid JSON: %v", name, err)
	}
	merged, err := mergeServer(name, prev, bv)
	if err != nil {
		return nil, err
	}
	return encodeOrdered(merged, false)
}

// SetServerEnabled changes only the enabled flag of one server and returns
// the new file, indented. An unknown server (or a missing file) is an
// EditNotFound error.
func SetServerEnabled(data []byte, name string, enabled bool) ([]byte, error) {
	notFound := editErrorf(EditNotFound, name, "", "MCP server '%s' not found", name)
	if len(data) == 0 {
		return nil, notFound
	}
	top, err := decodeTop(data)
	if err != nil {
		return nil, editErrorf(EditSchema, "", "", "the stored config cannot be edited: %v", err)
	}
	servers, err := serversOf(data)
	if err != nil {
		return nil, editErrorf(EditSchema, "", "mcpServers", "the stored config cannot be edited: %v", err)
	}
	v, ok := servers.get(name)
	if !ok {
		return nil, notFound
	}
	entry, ok := v.(*object)
	if !ok {
		return nil, editErrorf(EditSchema, name, "", "MCP server '%s' must be a JSON object, got %s", name, kindOf(v))
	}
	entry.set("enabled", enabled)
	top.set("mcpServers", servers)
	return encodeOrdered(top, true)
}

// mergeServer merges one body entry with the stored entry (nil when new).
func mergeServer(name string, stored *object, bv any) (any, error) {
	body, ok := bv.(*object)
	if !ok {
		return nil, editErrorf(EditSchema, name, "", "MCP server '%s' must be a JSON object, got %s", name, kindOf(bv))
	}
	out := cloneOrdered(body).(*object)
	if stored == nil {
		if field := maskedPlaceholder(out); field != "" {
			return nil, editErrorf(EditInvalid, name, field,
				"Cannot persist masked secret placeholder for MCP server '%s' field '%s'; provide a real value.", name, field)
		}
		return out, nil
	}
	for _, f := range []struct{ field, label string }{{"env", "env key"}, {"headers", "header"}} {
		if err := restoreValues(name, out, stored, f.field, f.label); err != nil {
			return nil, err
		}
	}
	if err := mergeOAuth(name, out, stored); err != nil {
		return nil, err
	}
	if bu, ok := out.get("url"); ok {
		if u, ok := bu.(string); ok {
			sv, _ := stored.get("url")
			restored, err := restoreURL(name, "url", sv, u)
			if err != nil {
				return nil, err
			}
			out.set("url", restored)
		}
	}
	if ba, ok := out.get("args"); ok {
		sv, _ := stored.get("args")
		restored, err := restoreArgs(name, sv, ba)
		if err != nil {
			return nil, err
		}
		out.set("args", restored)
	}
	if bu, ok := objectAt(out, "user_auth"); ok {
		su, _ := objectAt(stored, "user_auth")
		if err := restoreValues(name, bu, su, "users", "user_auth.users key"); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"routing", "tools"} {
		if _, present := out.get(k); !present {
			if sv, ok := stored.get(k); ok {
				out.set(k, cloneOrdered(sv))
			}
		}
	}
	for _, k := range out.keys {
		if knownServerKeys[k] || k == "transport" {
			continue
		}
		sv, had := stored.get(k)
		merged, err := mergeExtra(name, k, sv, had, out.vals[k])
		if err != nil {
			return nil, err
		}
		out.vals[k] = merged
	}
	for _, k := range stored.keys {
		if knownServerKeys[k] || k == "transport" {
			continue
		}
		if _, present := out.get(k); !present {
			out.set(k, cloneOrdered(stored.vals[k]))
		}
	}
	return out, nil
}

// restoreValues replaces "***" values of out[field] by the stored ones; a
// "***" for a key without a stored value is refused.
func restoreValues(name string, out, stored *object, field, label string) error {
	bo, ok := objectAt(out, field)
	if !ok {
		return nil
	}
	so, _ := objectAt(stored, field)
	for _, k := range bo.keys {
		if bo.vals[k] != MaskedValue {
			continue
		}
		if so != nil {
			if sv, ok := so.get(k); ok {
				bo.vals[k] = cloneOrdered(sv)
				continue
			}
		}
		return editErrorf(EditInvalid, name, field+"."+k, "Cannot set %s '%s' to masked value '%s'; provide a real value.", label, k, MaskedValue)
	}
	return nil
}

// mergeOAuth applies the oauth rules: null, absent or "***" keeps a stored
// client_secret / refresh_token, "" clears it.
func mergeOAuth(name string, out, stored *object) error {
	bo, ok := objectAt(out, "oauth")
	if !ok {
		return nil
	}
	so, _ := objectAt(stored, "oauth")
	for _, k := range oauthSecretKeys {
		v, present := bo.get(k)
		switch {
		case v == "":
			bo.del(k)
		case v == nil || v == MaskedValue:
			var sv any
			if so != nil {
				sv, _ = so.get(k)
			}
			switch {
			case sv != nil:
				bo.set(k, cloneOrdered(sv))
			case v == MaskedValue:
				return editErrorf(EditInvalid, name, "oauth."+k, "Cannot set oauth key '%s' to masked value '%s'; provide a real value.", k, MaskedValue)
			case present:
				bo.del(k)
			}
		}
	}
	if err := restoreValues(name, bo, so, "extra_token_params", "oauth.extra_token_params key"); err != nil {
		return err
	}
	if bu, ok := bo.get("token_url"); ok {
		if u, ok := bu.(string); ok {
			var sv any
			if so != nil {
				sv, _ = so.get("token_url")
			}
			restored, err := restoreURL(name, "oauth.token_url", sv, u)
			if err != nil {
				return err
			}
			bo.set("token_url", restored)
		}
	}
	for _, k := range bo.keys {
		if oauthTypedKeys[k] || k == "extra_token_params" || k == "client_secret" || k == "refresh_token" {
			continue
		}
		var sv any
		var had bool
		if so != nil {
			sv, had = so.get(k)
		}
		merged, err := mergeExtra(name, k, sv, had, bo.vals[k])
		if err != nil {
			return err
		}
		bo.vals[k] = merged
	}
	return nil
}

// mergeExtra merges an untyped value: a masked sensitive key restores the
// stored value; objects merge key by key keeping stored keys the body left
// out; lists merge element by element.
func mergeExtra(name, key string, stored any, had bool, body any) (any, error) {
	if body == MaskedValue && IsSensitiveKey(key) {
		if had {
			return cloneOrdered(stored), nil
		}
		return nil, editErrorf(EditInvalid, name, key, "Cannot set extra config key '%s' to masked value '%s'; provide a real value.", key, MaskedValue)
	}
	switch b := body.(type) {
	case *object:
		s, _ := stored.(*object)
		out := newObject()
		if s != nil {
			for _, k := range s.keys {
				if _, inBody := b.get(k); !inBody {
					out.set(k, cloneOrdered(s.vals[k]))
				}
			}
		}
		for _, k := range b.keys {
			var sv any
			var had bool
			if s != nil {
				sv, had = s.get(k)
			}
			merged, err := mergeExtra(name, k, sv, had, b.vals[k])
			if err != nil {
				return nil, err
			}
			out.set(k, merged)
		}
		return out, nil
	case []any:
		s, _ := stored.([]any)
		out := make([]any, len(b))
		for i, e := range b {
			var sv any
			had := i < len(s)
			if had {
				sv = s[i]
			}
			merged, err := mergeExtra(name, key, sv, had, e)
			if err != nil {
				return nil, err
			}
			out[i] = merged
		}
		return out, nil
	default:
		return body, nil
	}
}

// maskedPlaceholder returns the first field of a new server entry that holds
// "***" where a secret would be masked, or "".
func maskedPlaceholder(srv *object) string {
	if u, ok := srv.vals["url"].(string); ok && urlPlaceholder(u) {
		return "url"
	}
	if args, ok := argStrings(srv.vals["args"]); ok {
		if i := argPlaceholder(args); i >= 0 {
			return fmt.Sprintf("args[%d]", i)
		}
	}
	for _, f := range []string{"env", "headers"} {
		if o, ok := objectAt(srv, f); ok {
			for _, k := range o.keys {
				if o.vals[k] == MaskedValue {
					return f + "." + k
				}
			}
		}
	}
	if oa, ok := objectAt(srv, "oauth"); ok {
		if u, ok := oa.vals["token_url"].(string); ok && urlPlaceholder(u) {
			return "oauth.token_url"
		}
		for _, k := range oauthSecretKeys {
			if v, _ := oa.get(k); v == MaskedValue {
				return "oauth." + k
			}
		}
		if o, ok := objectAt(oa, "extra_token_params"); ok {
			for _, k := range o.keys {
				if o.vals[k] == MaskedValue {
					return "oauth.extra_token_params." + k
				}
			}
		}
		for _, k := range oa.keys {
			if oauthTypedKeys[k] || k == "extra_token_params" {
				continue
			}
			if p := maskedSensitive(k, oa.vals[k]); p != "" {
				return "oauth." + p
			}
		}
	}
	if ua, ok := objectAt(srv, "user_auth"); ok {
		if o, ok := objectAt(ua, "users"); ok {
			for _, k := range o.keys {
				if o.vals[k] == MaskedValue {
					return "user_auth.users." + k
				}
			}
		}
	}
	for _, k := range srv.keys {
		if knownServerKeys[k] {
			continue
		}
		if p := maskedSensitive(k, srv.vals[k]); p != "" {
			return p
		}
	}
	return ""
}

// maskedSensitive returns the path of a "***" under a sensitive key inside
// v (reached by key), or "".
func maskedSensitive(key string, v any) string {
	if v == MaskedValue && IsSensitiveKey(key) {
		return key
	}
	switch x := v.(type) {
	case *object:
		for _, k := range x.keys {
			if p := maskedSensitive(k, x.vals[k]); p != "" {
				return key + "." + p
			}
		}
	case []any:
		for i, e := range x {
			if p := maskedSensitive(key, e); p != "" {
				return fmt.Sprintf("%s[%d]%s", key, i, p[len(key):])
			}
		}
	}
	return ""
}

func objectAt(o *object, field string) (*object, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.get(field)
	if !ok {
		return nil, false
	}
	obj, ok := v.(*object)
	return obj, ok
}

// ParseAsWritten parses an extensions file's bytes judging "$VAR" values as
// written: inside mcpServers every whole-string "$VAR" value is replaced by
// the stand-in "VAR" before parsing, so the verdict does not depend on this
// host's environment (every service expands the file in its own). Use it to
// validate a candidate config; never to run one.
func ParseAsWritten(path string, data []byte) (*Extensions, error) {
	if len(data) == 0 {
		return ParseExtensions(path, []byte("{}"))
	}
	top, err := decodeTop(data)
	if err != nil {
		return ParseExtensions(path, data) // the parser's own message
	}
	if v, ok := top.get("mcpServers"); ok {
		if servers, ok := v.(*object); ok {
			for _, k := range servers.keys {
				servers.vals[k] = standIns(servers.vals[k])
			}
		}
	}
	out, err := encodeOrdered(top, false)
	if err != nil {
		return nil, err
	}
	return ParseExtensions(path, out)
}

func standIns(v any) any {
	switch x := v.(type) {
	case string:
		if len(x) > 1 && x[0] == '$' {
			return x[1:]
		}
		return x
	case *object:
		for _, k := range x.keys {
			x.vals[k] = standIns(x.vals[k])
		}
		return x
	case []any:
		for i := range x {
			x[i] = standIns(x[i])
		}
		return x
	default:
		return v
	}
}
