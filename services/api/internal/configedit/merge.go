package configedit

import (
	"encoding/json"
	"fmt"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/orderedjson"
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
//     one at the same position restores it. A kept secret whose
//     destination the edit changes is refused (destination.go): headers
//     and user_auth.users follow url's origin, the oauth secrets
//     token_url's, env and masked args the command (and env the args);
//     an omitted routing or tools
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
	top := orderedjson.NewObject()
	if len(data) > 0 {
		t, err := config.DecodeTop(data)
		if err != nil {
			return nil, editErrorf(EditSchema, "", "", "the stored config cannot be edited: %v", err)
		}
		top = t
	}
	stored, err := config.ServerEntries(data)
	if err != nil {
		return nil, editErrorf(EditSchema, "", "mcpServers", "the stored config cannot be edited: %v", err)
	}
	bv, err := orderedjson.Decode(servers)
	if err != nil {
		return nil, editErrorf(EditSchema, "", "mcp_servers", "mcp_servers is not valid JSON: %v", err)
	}
	body, ok := bv.(*orderedjson.Object)
	if !ok {
		return nil, editErrorf(EditSchema, "", "mcp_servers", "mcp_servers must be a JSON object, got %s", orderedjson.Kind(bv))
	}
	next := orderedjson.NewObject()
	for _, name := range body.Keys() {
		var prev *orderedjson.Object
		if sv, ok := stored.Get(name); ok {
			prev, _ = sv.(*orderedjson.Object)
		}
		merged, err := mergeServer(name, prev, body.Value(name))
		if err != nil {
			return nil, err
		}
		next.Set(name, merged)
	}
	top.Set("mcpServers", next)
	return orderedjson.Encode(top, true)
}

// MergeServerEntry merges one server entry sent by a client with the stored
// one (nil for a new server) by the rules of ReplaceServers, and returns it
// compact. Errors are *EditError.
func MergeServerEntry(name string, stored, body json.RawMessage) (json.RawMessage, error) {
	var prev *orderedjson.Object
	if len(stored) > 0 {
		v, err := orderedjson.Decode(stored)
		if err != nil {
			return nil, editErrorf(EditSchema, name, "", "the stored definition of MCP server '%s' is not valid JSON", name)
		}
		prev, _ = v.(*orderedjson.Object)
	}
	bv, err := orderedjson.Decode(body)
	if err != nil {
		return nil, editErrorf(EditSchema, name, "", "MCP server '%s' is not valid JSON: %v", name, err)
	}
	merged, err := mergeServer(name, prev, bv)
	if err != nil {
		return nil, err
	}
	return orderedjson.Encode(merged, false)
}

// SetServerEnabled changes only the enabled flag of one server and returns
// the new file, indented. An unknown server (or a missing file) is an
// EditNotFound error.
func SetServerEnabled(data []byte, name string, enabled bool) ([]byte, error) {
	notFound := editErrorf(EditNotFound, name, "", "MCP server '%s' not found", name)
	if len(data) == 0 {
		return nil, notFound
	}
	top, err := config.DecodeTop(data)
	if err != nil {
		return nil, editErrorf(EditSchema, "", "", "the stored config cannot be edited: %v", err)
	}
	servers, err := config.ServerEntries(data)
	if err != nil {
		return nil, editErrorf(EditSchema, "", "mcpServers", "the stored config cannot be edited: %v", err)
	}
	v, ok := servers.Get(name)
	if !ok {
		return nil, notFound
	}
	entry, ok := v.(*orderedjson.Object)
	if !ok {
		return nil, editErrorf(EditSchema, name, "", "MCP server '%s' must be a JSON object, got %s", name, orderedjson.Kind(v))
	}
	entry.Set("enabled", enabled)
	top.Set("mcpServers", servers)
	return orderedjson.Encode(top, true)
}

// mergeServer merges one body entry with the stored entry (nil when new).
func mergeServer(name string, stored *orderedjson.Object, bv any) (any, error) {
	body, ok := bv.(*orderedjson.Object)
	if !ok {
		return nil, editErrorf(EditSchema, name, "", "MCP server '%s' must be a JSON object, got %s", name, orderedjson.Kind(bv))
	}
	out := orderedjson.Clone(body).(*orderedjson.Object)
	if stored == nil {
		if field := maskedPlaceholder(out); field != "" {
			return nil, editErrorf(EditInvalid, name, field,
				"Cannot persist masked secret placeholder for MCP server '%s' field '%s'; provide a real value.", name, field)
		}
		return out, nil
	}
	if err := checkDestinations(name, out, stored); err != nil {
		return nil, err
	}
	for _, f := range []struct{ field, label string }{{"env", "env key"}, {"headers", "header"}} {
		if err := restoreValues(name, out, stored, f.field, f.label); err != nil {
			return nil, err
		}
	}
	if err := mergeOAuth(name, out, stored); err != nil {
		return nil, err
	}
	if bu, ok := out.Get("url"); ok {
		if u, ok := bu.(string); ok {
			sv, _ := stored.Get("url")
			restored, err := restoreURL(name, "url", sv, u)
			if err != nil {
				return nil, err
			}
			out.Set("url", restored)
		}
	}
	if ba, ok := out.Get("args"); ok {
		sv, _ := stored.Get("args")
		restored, err := restoreArgs(name, sv, ba)
		if err != nil {
			return nil, err
		}
		out.Set("args", restored)
	}
	if bu, ok := objectAt(out, "user_auth"); ok {
		su, _ := objectAt(stored, "user_auth")
		if err := restoreValues(name, bu, su, "users", "user_auth.users key"); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"routing", "tools"} {
		if _, present := out.Get(k); !present {
			if sv, ok := stored.Get(k); ok {
				out.Set(k, orderedjson.Clone(sv))
			}
		}
	}
	for _, k := range out.Keys() {
		if config.IsKnownServerKey(k) || k == "transport" {
			continue
		}
		sv, had := stored.Get(k)
		merged, err := mergeExtra(name, k, sv, had, out.Value(k))
		if err != nil {
			return nil, err
		}
		out.Set(k, merged)
	}
	for _, k := range stored.Keys() {
		if config.IsKnownServerKey(k) || k == "transport" {
			continue
		}
		if _, present := out.Get(k); !present {
			out.Set(k, orderedjson.Clone(stored.Value(k)))
		}
	}
	return out, nil
}

// restoreValues replaces "***" values of out[field] by the stored ones; a
// "***" for a key without a stored value is refused.
func restoreValues(name string, out, stored *orderedjson.Object, field, label string) error {
	bo, ok := objectAt(out, field)
	if !ok {
		return nil
	}
	so, _ := objectAt(stored, field)
	for _, k := range bo.Keys() {
		if bo.Value(k) != config.MaskedValue {
			continue
		}
		if so != nil {
			if sv, ok := so.Get(k); ok {
				bo.Set(k, orderedjson.Clone(sv))
				continue
			}
		}
		return editErrorf(EditInvalid, name, field+"."+k, "Cannot set %s '%s' to masked value '%s'; provide a real value.", label, k, config.MaskedValue)
	}
	return nil
}

// mergeOAuth applies the oauth rules: null, absent or "***" keeps a stored
// client_secret / refresh_token, "" clears it.
func mergeOAuth(name string, out, stored *orderedjson.Object) error {
	bo, ok := objectAt(out, "oauth")
	if !ok {
		return nil
	}
	so, _ := objectAt(stored, "oauth")
	for _, k := range oauthSecretKeys {
		v, present := bo.Get(k)
		switch {
		case v == "":
			bo.Delete(k)
		case v == nil || v == config.MaskedValue:
			var sv any
			if so != nil {
				sv, _ = so.Get(k)
			}
			switch {
			case sv != nil:
				bo.Set(k, orderedjson.Clone(sv))
			case v == config.MaskedValue:
				return editErrorf(EditInvalid, name, "oauth."+k, "Cannot set oauth key '%s' to masked value '%s'; provide a real value.", k, config.MaskedValue)
			case present:
				bo.Delete(k)
			}
		}
	}
	if err := restoreValues(name, bo, so, "extra_token_params", "oauth.extra_token_params key"); err != nil {
		return err
	}
	if bu, ok := bo.Get("token_url"); ok {
		if u, ok := bu.(string); ok {
			var sv any
			if so != nil {
				sv, _ = so.Get("token_url")
			}
			restored, err := restoreURL(name, "oauth.token_url", sv, u)
			if err != nil {
				return err
			}
			bo.Set("token_url", restored)
		}
	}
	for _, k := range bo.Keys() {
		if oauthTypedKeys[k] || k == "extra_token_params" || k == "client_secret" || k == "refresh_token" {
			continue
		}
		var sv any
		var had bool
		if so != nil {
			sv, had = so.Get(k)
		}
		merged, err := mergeExtra(name, k, sv, had, bo.Value(k))
		if err != nil {
			return err
		}
		bo.Set(k, merged)
	}
	return nil
}

// mergeExtra merges an untyped value: a masked sensitive key restores the
// stored value; objects merge key by key keeping stored keys the body left
// out; lists merge element by element.
func mergeExtra(name, key string, stored any, had bool, body any) (any, error) {
	if body == config.MaskedValue && config.IsSensitiveKey(key) {
		if had {
			return orderedjson.Clone(stored), nil
		}
		return nil, editErrorf(EditInvalid, name, key, "Cannot set extra config key '%s' to masked value '%s'; provide a real value.", key, config.MaskedValue)
	}
	switch b := body.(type) {
	case *orderedjson.Object:
		s, _ := stored.(*orderedjson.Object)
		out := orderedjson.NewObject()
		if s != nil {
			for _, k := range s.Keys() {
				if _, inBody := b.Get(k); !inBody {
					out.Set(k, orderedjson.Clone(s.Value(k)))
				}
			}
		}
		for _, k := range b.Keys() {
			var sv any
			var had bool
			if s != nil {
				sv, had = s.Get(k)
			}
			merged, err := mergeExtra(name, k, sv, had, b.Value(k))
			if err != nil {
				return nil, err
			}
			out.Set(k, merged)
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
func maskedPlaceholder(srv *orderedjson.Object) string {
	if u, ok := srv.Value("url").(string); ok && config.HasURLPlaceholder(u) {
		return "url"
	}
	if args, ok := argStrings(srv.Value("args")); ok {
		if i := argPlaceholder(args); i >= 0 {
			return fmt.Sprintf("args[%d]", i)
		}
	}
	for _, f := range []string{"env", "headers"} {
		if o, ok := objectAt(srv, f); ok {
			for _, k := range o.Keys() {
				if o.Value(k) == config.MaskedValue {
					return f + "." + k
				}
			}
		}
	}
	if oa, ok := objectAt(srv, "oauth"); ok {
		if u, ok := oa.Value("token_url").(string); ok && config.HasURLPlaceholder(u) {
			return "oauth.token_url"
		}
		for _, k := range oauthSecretKeys {
			if v, _ := oa.Get(k); v == config.MaskedValue {
				return "oauth." + k
			}
		}
		if o, ok := objectAt(oa, "extra_token_params"); ok {
			for _, k := range o.Keys() {
				if o.Value(k) == config.MaskedValue {
					return "oauth.extra_token_params." + k
				}
			}
		}
		for _, k := range oa.Keys() {
			if oauthTypedKeys[k] || k == "extra_token_params" {
				continue
			}
			if p := maskedSensitive(k, oa.Value(k)); p != "" {
				return "oauth." + p
			}
		}
	}
	if ua, ok := objectAt(srv, "user_auth"); ok {
		if o, ok := objectAt(ua, "users"); ok {
			for _, k := range o.Keys() {
				if o.Value(k) == config.MaskedValue {
					return "user_auth.users." + k
				}
			}
		}
	}
	for _, k := range srv.Keys() {
		if config.IsKnownServerKey(k) {
			continue
		}
		if p := maskedSensitive(k, srv.Value(k)); p != "" {
			return p
		}
	}
	return ""
}

// maskedSensitive returns the path of a "***" under a sensitive key inside
// v (reached by key), or "".
func maskedSensitive(key string, v any) string {
	if v == config.MaskedValue && config.IsSensitiveKey(key) {
		return key
	}
	switch x := v.(type) {
	case *orderedjson.Object:
		for _, k := range x.Keys() {
			if p := maskedSensitive(k, x.Value(k)); p != "" {
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

func objectAt(o *orderedjson.Object, field string) (*orderedjson.Object, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.Get(field)
	if !ok {
		return nil, false
	}
	obj, ok := v.(*orderedjson.Object)
	return obj, ok
}
