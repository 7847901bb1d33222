package config

import (
	"encoding/json"
	"fmt"
	"math"
	neturl "net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpbus/mcpbus/pkg/headers"
	"github.com/mcpbus/mcpbus/pkg/pinning"
)

// knownServerKeys are the typed keys of an mcpServers entry; any other key
// (and "transport", which is also an alias for type) is kept in Extra.
var knownServerKeys = map[string]bool{
	"enabled": true, "type": true, "command": true, "args": true, "env": true,
	"url": true, "headers": true, "oauth": true, "description": true,
	"routing": true, "tools": true, "tool_name_prefix": true,
	"tool_call_timeout": true, "session_init_timeout": true,
	"task_toolsets": true, "cwd": true, "headers_from_context": true,
	"user_auth": true, "max_response_bytes": true, "follow_redirects": true, "pinning": true,
	"quotas": true,
}

// parseServer builds one Server from its raw entry, expanding string values
// with expand. It returns nil (and the problems) when the entry has any
// error.
func parseServer(file, name string, raw json.RawMessage, expand func(string) string) (*Server, []Problem) {
	p := &serverParser{file: file, name: name}
	v, err := decodeJSON(raw)
	if err != nil {
		p.errorf("", "could not be decoded: %v", err)
		return nil, p.problems
	}
	if _, ok := v.(map[string]any); !ok {
		p.errorf("", "must be a JSON object, got %s", jsonKind(v))
		return nil, p.problems
	}
	written := v.(map[string]any)
	m := expandWith(v, expand).(map[string]any)

	s := &Server{Name: name, Raw: raw}
	s.Enabled = p.boolean(m, "enabled", "enabled", true)
	s.Type = p.transport(m)
	s.Command, _ = p.str(m, "command", "command")
	s.Args = p.strList(m, "args", "args")
	s.Env = p.strMap(m, "env", "env")
	s.URL, _ = p.str(m, "url", "url")
	s.Headers = p.strMap(m, "headers", "headers")
	p.headerNames("headers", s.Headers)
	s.FollowRedirects = p.boolean(m, "follow_redirects", "follow_redirects", false)
	s.Description, _ = p.str(m, "description", "description")
	s.ToolNamePrefix = p.boolean(m, "tool_name_prefix", "tool_name_prefix", true)
	s.ToolCallTimeout = p.seconds(m, "tool_call_timeout", 0)
	s.SessionInitTimeout = p.seconds(m, "session_init_timeout", DefaultSessionInitTimeout)
	s.Cwd, _ = p.str(m, "cwd", "cwd")
	s.MaxResponseBytes = p.maxResponseBytes(m)
	s.Pinning = p.pinning(m)
	s.Quotas = p.quotas(m["quotas"])
	s.Routing = p.serverRouting(m["routing"])
	s.Tools = p.tools(m["tools"])
	s.OAuth = p.oauth(m["oauth"])
	s.TaskToolsets = p.taskToolsets(m["task_toolsets"])
	s.HeadersFromContext = p.headersFromContext(m["headers_from_context"], s.Type)
	s.UserAuth = p.userAuth(m["user_auth"], s.Type)
	p.crossFields(s)
	p.writtenValues(written, s.Type)

	var rawFields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rawFields); err == nil {
		for _, k := range sortedKeys(rawFields) {
			if r := rawFields[k]; !knownServerKeys[k] {
				switch s := suggest(k, sortedKeys(knownServerKeys)); {
				case k == "transport":
				case s != "":
					p.errorf(k, "%s", unknownKeyMessage(k, s))
				default:
					p.warnf(k, "unknown key; kept in the file as written but not used by mcpbus")
				}
				if s.Extra == nil {
					s.Extra = map[string]json.RawMessage{}
				}
				s.Extra[k] = r
			}
		}
	}
	s.Fingerprint = fingerprintOf(map[string]any{"name": name, "config": m})
	if p.failed {
		return nil, p.problems
	}
	return s, p.problems
}

// maxResponseBytes reads max_response_bytes: absent or null is 0 (the
// deployment's limits.max_upstream_response_bytes), else at least 1024.
func (p *serverParser) maxResponseBytes(m map[string]any) int64 {
	n, ok := p.integer(m, "max_response_bytes", "max_response_bytes")
	if !ok {
		return 0
	}
	if n < 1024 {
		p.errorf("max_response_bytes", "must be at least 1024 (bytes), got %d", n)
		return 0
	}
	return int64(n)
}

// pinning reads the tool pinning policy; absent or null is "" (the
// settings' default).
func (p *serverParser) pinning(m map[string]any) pinning.Policy {
	v, ok := p.str(m, "pinning", "pinning")
	if !ok {
		return ""
	}
	pol, err := pinning.ParsePolicy(v)
	if err != nil || v == "" {
		p.errorf("pinning", "must be one of %s, got %q", pinning.PoliciesText(), v)
		return ""
	}
	return pol
}

// transport resolves type, with "transport" used only when type is empty.
func (p *serverParser) transport(m map[string]any) string {
	field := "type"
	t, _ := p.str(m, "type", "type")
	if t == "" {
		if tr, _ := p.str(m, "transport", "transport"); tr != "" {
			t, field = tr, "transport"
		}
	}
	switch t {
	case "":
		return TransportStdio
	case TransportStdio, TransportSSE, TransportHTTP:
		return t
	default:
		p.errorf(field, "unsupported transport type %q (expected stdio, sse or http; case-sensitive)", t)
		return t
	}
}

// headerNames rejects blank names, names that are not HTTP tokens and two
// spellings of one header. Messages never echo a name (a misplaced
// "Authorization: Bearer …" key would carry a secret).
func (p *serverParser) headerNames(field string, hs map[string]string) {
	for _, h := range sortedKeys(hs) {
		switch {
		case strings.TrimSpace(h) == "":
			p.errorf(field, "must not contain a blank header name")
		case !headers.ValidName(h):
			p.errorf(field, "%s", BadHeaderNameReason)
		}
	}
	p.headerSpellings(field, hs)
}

// BadHeaderNameReason refuses an invalid header name without echoing it.
const BadHeaderNameReason = "has a header name that is not a valid HTTP token (letters, digits and !#$%&'*+-.^_`|~ only; no spaces, colons or line breaks)"

// writtenValues checks the values as written that must be URLs or header
// names; a whole-string "$VAR" is judged where it is expanded and used.
func (p *serverParser) writtenValues(m map[string]any, transport string) {
	url := func(v any, field string) {
		if s, ok := v.(string); ok && s != "" && !IsPlaceholder(s) {
			if reason := CheckUpstreamURL(s); reason != "" {
				p.errorf(field, "%s", reason)
			}
		}
	}
	if transport == TransportHTTP || transport == TransportSSE {
		url(m["url"], "url")
	}
	if oa, ok := m["oauth"].(map[string]any); ok {
		url(oa["token_url"], "oauth.token_url")
	}
	if hfc, ok := m["headers_from_context"].(map[string]any); ok {
		if h, ok := hfc["headers"].(map[string]any); ok {
			for _, k := range sortedKeys(h) {
				if !headers.ValidName(k) {
					p.errorf("headers_from_context.headers", "%s", BadHeaderNameReason)
				}
			}
		}
	}
	if ua, ok := m["user_auth"].(map[string]any); ok {
		if h, ok := ua["header"].(string); ok && h != "" && !IsPlaceholder(h) && !headers.ValidName(h) {
			p.errorf("user_auth.header", "is not a valid HTTP header name")
		}
	}
}

// CheckUpstreamURL returns why s cannot be the URL of an upstream MCP
// server or token endpoint, or "": it must parse, use http or https
// (file://, ftp:// and any other scheme are refused) and name a host. The
// reason never contains the URL.
func CheckUpstreamURL(s string) string {
	u, err := neturl.Parse(s)
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

// crossFields checks rules that span fields.
func (p *serverParser) crossFields(s *Server) {
	switch s.Type {
	case TransportStdio:
		if strings.TrimSpace(s.Command) == "" {
			p.errorf("command", "the stdio transport requires a non-empty 'command' field")
		}
	case TransportSSE, TransportHTTP:
		if strings.TrimSpace(s.URL) == "" {
			p.errorf("url", "the %s transport requires a non-empty 'url' field", s.Type)
		}
	}
	if !s.TaskEnabled() {
		return
	}
	if strings.TrimSpace(s.Name) == "" || utf8.RuneCountInString(s.Name) > MaxTaskServerNameChars {
		p.errorf("task_toolsets", "MCP task server name must contain 1 to %d characters", MaxTaskServerNameChars)
	}
	if h := s.HeadersFromContext; h != nil && h.Enabled {
		msg := "headers_from_context is sent on task submit only; status and cancel polls skip it and use static headers, OAuth"
		if s.UserAuth != nil && s.UserAuth.Enabled {
			msg += " or the task owner's user_auth credential"
		}
		p.warnf("headers_from_context", "%s, so on_missing does not guard them", msg)
	}
}

// serverParser collects the problems of one mcpServers entry. Messages name
// fields and keys only, never a value that could be a credential.
type serverParser struct {
	file, name string
	problems   []Problem
	failed     bool
}

func (p *serverParser) errorf(field, format string, args ...any) {
	p.failed = true
	p.add(field, SeverityError, fmt.Sprintf(format, args...))
}

func (p *serverParser) warnf(field, format string, args ...any) {
	p.add(field, SeverityWarning, fmt.Sprintf(format, args...))
}

func (p *serverParser) add(field, severity, msg string) {
	p.problems = append(p.problems, Problem{File: p.file, Server: p.name, Field: field, Message: msg, Severity: severity})
}

// str reads an optional string; absent and null give ("", false).
func (p *serverParser) str(m map[string]any, key, field string) (string, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		p.errorf(field, "must be a string, got %s", jsonKind(v))
		return "", false
	}
	return s, true
}

// boolean reads an optional boolean; absent and null give def.
func (p *serverParser) boolean(m map[string]any, key, field string, def bool) bool {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		p.errorf(field, "must be true or false, got %s", jsonKind(v))
		return def
	}
	return b
}

// object reads an optional object; absent and null give (nil, false).
func (p *serverParser) object(v any, field string) (map[string]any, bool) {
	if v == nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.errorf(field, "must be an object, got %s", jsonKind(v))
		return nil, false
	}
	return m, true
}

// strList reads an optional list of strings.
func (p *serverParser) strList(m map[string]any, key, field string) []string {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		p.errorf(field, "must be a list of strings, got %s", jsonKind(v))
		return nil
	}
	out := make([]string, 0, len(list))
	for i, item := range list {
		s, ok := item.(string)
		if !ok {
			p.errorf(fmt.Sprintf("%s[%d]", field, i), "must be a string, got %s", jsonKind(item))
			continue
		}
		out = append(out, s)
	}
	return out
}

// strMap reads an optional object of strings. Errors name the key only.
func (p *serverParser) strMap(m map[string]any, key, field string) map[string]string {
	obj, ok := p.object(m[key], field)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(obj))
	for _, k := range sortedKeys(obj) {
		s, ok := obj[k].(string)
		if !ok {
			p.errorf(field, "the value for key '%s' must be a string, got %s", k, jsonKind(obj[k]))
			continue
		}
		out[k] = s
	}
	return out
}

// number reads an optional JSON number as float64.
func (p *serverParser) number(v any, field, what string) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		p.errorf(field, "must be %s, got %s", what, jsonKind(v))
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		p.errorf(field, "must be %s, got an out-of-range number", what)
		return 0, false
	}
	return f, true
}

// integer reads an optional whole number; absent and null give (0, false).
// The result saturates at ±1e9 so later range checks stay meaningful.
func (p *serverParser) integer(m map[string]any, key, field string) (int, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return 0, false
	}
	f, ok := p.number(v, field, "an integer")
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) {
		p.errorf(field, "must be an integer, got a fraction")
		return 0, false
	}
	return int(math.Max(-1e9, math.Min(1e9, f))), true
}

// seconds reads a timeout in seconds (fractions allowed). Absent gives def,
// null gives 0 (no limit / disabled). Negative values are errors.
func (p *serverParser) seconds(m map[string]any, key string, def time.Duration) time.Duration {
	v, ok := m[key]
	if !ok {
		return def
	}
	if v == nil {
		return 0
	}
	f, ok := p.number(v, key, "a number of seconds or null")
	if !ok {
		return def
	}
	if f < 0 {
		p.errorf(key, "must not be negative")
		return def
	}
	if f > float64(math.MaxInt64)/float64(time.Second) {
		p.errorf(key, "is too large")
		return def
	}
	return time.Duration(math.Round(f * float64(time.Second)))
}

// unknownKeys reports keys of m outside allowed. strict keys are errors,
// others warnings (the key is ignored).
func (p *serverParser) unknownKeys(m map[string]any, field string, strict bool, allowed ...string) {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	for _, k := range sortedKeys(m) {
		if ok[k] {
			continue
		}
		msg := fmt.Sprintf("unknown key (allowed: %s)", strings.Join(allowed, ", "))
		if s := suggest(k, allowed); s != "" {
			p.errorf(field+"."+k, "%s", unknownKeyMessage(k, s))
			continue
		}
		if strict {
			p.errorf(field+"."+k, "%s", msg)
		} else {
			p.warnf(field+"."+k, "%s; ignored", msg)
		}
	}
}

// headerSpellings rejects two keys naming the same HTTP header.
func (p *serverParser) headerSpellings(field string, headers map[string]string) {
	first := map[string]string{}
	for _, h := range sortedKeys(headers) {
		lower := strings.ToLower(h)
		if prev, dup := first[lower]; dup {
			p.errorf(field, "maps the same HTTP header under two spellings ('%s' and '%s'); header names are case-insensitive, so keep only one", prev, h)
			continue
		}
		first[lower] = h
	}
}

// onMissing reads on_missing: deny (default) or passthrough.
func (p *serverParser) onMissing(m map[string]any, field string) string {
	v, _ := p.str(m, "on_missing", field)
	switch v {
	case "":
		return OnMissingDeny
	case OnMissingDeny, OnMissingPassthrough:
		return v
	default:
		p.errorf(field, "must be 'deny' or 'passthrough', got %q", v)
		return OnMissingDeny
	}
}
