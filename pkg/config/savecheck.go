package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

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
	v, err := decodeJSON(entry)
	if err != nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	bad := func(field, format string, args ...any) error {
		return editErrorf(EditInvalid, name, field, "MCP server '%s' field '%s' %s", name, field, fmt.Sprintf(format, args...))
	}
	if h, ok := m["headers"].(map[string]any); ok {
		for _, k := range sortedKeys(h) {
			field := "headers." + k
			if !headers.ValidName(k) {
				return bad("headers", "%s", badNameReason)
			}
			if s, ok := h[k].(string); ok && !placeholder(s) {
				if reason := headers.Check(s); reason != "" {
					return bad(field, "cannot be sent as an HTTP header value: it %s", reason)
				}
			}
		}
	}
	if hfc, ok := m["headers_from_context"].(map[string]any); ok {
		if h, ok := hfc["headers"].(map[string]any); ok {
			for _, k := range sortedKeys(h) {
				if !headers.ValidName(k) {
					return bad("headers_from_context.headers", "%s", badNameReason)
				}
			}
		}
	}
	if ua, ok := m["user_auth"].(map[string]any); ok {
		if h, ok := ua["header"].(string); ok && h != "" && !placeholder(h) && !headers.ValidName(h) {
			return bad("user_auth.header", "is not a valid HTTP header name")
		}
		if users, ok := ua["users"].(map[string]any); ok {
			for _, k := range sortedKeys(users) {
				if s, ok := users[k].(string); ok && !placeholder(s) {
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
	if t == TransportHTTP || t == TransportSSE {
		if u, ok := m["url"].(string); ok && !placeholder(u) {
			if reason := CheckUpstreamURL(u); reason != "" {
				return bad("url", "%s", reason)
			}
		}
	}
	if oa, ok := m["oauth"].(map[string]any); ok {
		if u, ok := oa["token_url"].(string); ok && u != "" && !placeholder(u) {
			if reason := CheckUpstreamURL(u); reason != "" {
				return bad("oauth.token_url", "%s", reason)
			}
		}
	}
	return nil
}

// badNameReason refuses an invalid header name without echoing it (a
// misplaced "Authorization: Bearer …" key would carry a secret).
const badNameReason = "has a header name that is not a valid HTTP token (letters, digits and !#$%&'*+-.^_`|~ only; no spaces, colons or line breaks)"

// CheckServerValues applies CheckEntryValues to every mcpServers entry of
// an extensions file's bytes, as written, or only to the entry named only.
func CheckServerValues(data []byte, only string) error {
	return eachEntry(data, only, CheckEntryValues)
}

// eachEntry calls check on every mcpServers entry of an extensions file's
// bytes, as written, in file order, or only on the entry named only; it
// stops at the first error.
func eachEntry(data []byte, only string, check func(name string, entry json.RawMessage) error) error {
	servers, err := serversOf(data)
	if err != nil {
		return err
	}
	for _, name := range servers.keys {
		if only != "" && name != only {
			continue
		}
		entry, err := encodeOrdered(servers.vals[name], false)
		if err != nil {
			return err
		}
		if err := check(name, entry); err != nil {
			return err
		}
	}
	return nil
}

// CheckUpstreamURL returns why s cannot be the URL of an upstream MCP
// server or token endpoint, or "": it must parse, use http or https
// (file://, gopher:// and any other scheme are refused) and name a host.
// The reason never contains the URL.
func CheckUpstreamURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "is not a valid URL"
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return "must be an absolute http:// or https:// URL"
	default:
		return "must use http or https, got scheme '" + u.Scheme + "'"
	}
	if u.Hostname() == "" {
		return "must name a host"
	}
	return ""
}

// placeholder reports whether s is a whole-string "$VAR" value.
func placeholder(s string) bool { return strings.HasPrefix(s, "$") }
