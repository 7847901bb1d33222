package configedit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/mcpbus/mcpbus/pkg/config"
	"maps"
	"slices"

	"github.com/mcpbus/mcpbus/pkg/headers"
)

// CheckEntryValues checks the values of one server entry as written that
// the call path would refuse on use, so that a save refuses them at once
// (EditInvalid, 400) instead of storing them:
//
//   - headers: every name is an HTTP token (headers.ValidName) and every
//     value can be sent as it is (headers.Check: no CR, LF or other control
//     character, ASCII only, no leading or trailing whitespace);
//   - headers_from_context.headers names, user_auth.header: HTTP tokens;
//     user_auth.users values: headers.Check;
//   - url of an http or sse server, and oauth.token_url: http or https
//     with a host.
//
// Whole-string "$VAR" values are left to the call path, which judges them
// expanded in its own environment. oauth.extra_token_params are sent
// form-encoded in a token request body, not as headers, so they are not
// checked here. Errors are *EditError naming the server and the field
// ("headers.X-Foo", "url"), never the value. Entries that are not objects
// pass (the schema check refuses them).
func CheckEntryValues(name string, entry json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(entry))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil // not an object: the schema check refuses it
	}
	bad := func(field, format string, args ...any) error {
		return editErrorf(EditInvalid, name, field, "MCP server '%s' field '%s' %s", name, field, fmt.Sprintf(format, args...))
	}
	if h, ok := m["headers"].(map[string]any); ok {
		for _, k := range slices.Sorted(maps.Keys(h)) {
			field := "headers." + k
			if !headers.ValidName(k) {
				return bad("headers", "%s", config.BadHeaderNameReason)
			}
			if s, ok := h[k].(string); ok && !config.IsPlaceholder(s) {
				if reason := headers.Check(s); reason != "" {
					return bad(field, "cannot be sent as an HTTP header value: it %s", reason)
				}
			}
		}
	}
	if hfc, ok := m["headers_from_context"].(map[string]any); ok {
		if h, ok := hfc["headers"].(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(h)) {
				if !headers.ValidName(k) {
					return bad("headers_from_context.headers", "%s", config.BadHeaderNameReason)
				}
			}
		}
	}
	if ua, ok := m["user_auth"].(map[string]any); ok {
		if h, ok := ua["header"].(string); ok && h != "" && !config.IsPlaceholder(h) && !headers.ValidName(h) {
			return bad("user_auth.header", "is not a valid HTTP header name")
		}
		if users, ok := ua["users"].(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(users)) {
				if s, ok := users[k].(string); ok && !config.IsPlaceholder(s) {
					if reason := headers.Check(s); reason != "" {
						return bad("user_auth.users."+k, "cannot be sent as an HTTP header value: it %s", reason)
					}
				}
			}
		}
	}
	t, _ := m["type"].(string)
	if t == "" {
		t, _ = m["transport"].(string)
	}
	if t == config.TransportHTTP || t == config.TransportSSE {
		if u, ok := m["url"].(string); ok && !config.IsPlaceholder(u) {
			if reason := config.CheckUpstreamURL(u); reason != "" {
				return bad("url", "%s", reason)
			}
		}
	}
	if oa, ok := m["oauth"].(map[string]any); ok {
		if u, ok := oa["token_url"].(string); ok && u != "" && !config.IsPlaceholder(u) {
			if reason := config.CheckUpstreamURL(u); reason != "" {
				return bad("oauth.token_url", "%s", reason)
			}
		}
	}
	return nil
}

// CheckServerValues applies CheckEntryValues to every mcpServers entry of
// an extensions file's bytes, as written, or only to the entry named only.
func CheckServerValues(data []byte, only string) error {
	return config.EachServerEntry(data, only, CheckEntryValues)
}
