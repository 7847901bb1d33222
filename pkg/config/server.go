package config

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Values of the enumerated server fields.
const (
	RoutingOff    = "off"
	RoutingPrefer = "prefer"

	OnMissingDeny        = "deny"
	OnMissingPassthrough = "passthrough"

	GrantClientCredentials = "client_credentials"
	GrantRefreshToken      = "refresh_token"

	// DefaultUserAuthHeader is user_auth.header when unset.
	DefaultUserAuthHeader = "Authorization"

	// MaxTaskServerNameChars bounds the name of a task-enabled server.
	MaxTaskServerNameChars = 128
	// MaxTaskToolsetNameChars bounds a task toolset name.
	MaxTaskToolsetNameChars = 255
)

// knownServerKeys are the typed keys of an mcpServers entry; any other key
// (and "transport", which is also an alias for type) is kept in Extra.
var knownServerKeys = map[string]bool{
	"enabled": true, "type": true, "command": true, "args": true, "env": true,
	"url": true, "headers": true, "oauth": true, "description": true,
	"routing": true, "tools": true, "tool_name_prefix": true,
	"tool_call_timeout": true, "session_init_timeout": true,
	"task_toolsets": true, "cwd": true, "headers_from_context": true,
	"user_auth": true, "max_response_bytes": true,
}

// parseServer builds one Server from its raw entry. It returns nil (and the
// problems) when the entry has any error.
func parseServer(file, name string, raw json.RawMessage) (*Server, []Problem) {
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
	m := expandEnv(v).(map[string]any)

	s := &Server{Name: name, Raw: raw}
	s.Enabled = p.boolean(m, "enabled", "enabled", true)
	s.Type = p.transport(m)
	s.Command, _ = p.str(m, "command", "command")
	s.Args = p.strList(m, "args", "args")
	s.Env = p.strMap(m, "env", "env")
	s.URL, _ = p.str(m, "url", "url")
	s.Headers = p.strMap(m, "headers", "headers")
	p.headerNames("headers", s.Headers)
	s.Description, _ = p.str(m, "description", "description")
	s.ToolNamePrefix = p.boolean(m, "tool_name_prefix", "tool_name_prefix", true)
	s.ToolCallTimeout = p.seconds(m, "tool_call_timeout", 0)
	s.SessionInitTimeout = p.seconds(m, "session_init_timeout", DefaultSessionInitTimeout)
	s.Cwd, _ = p.str(m, "cwd", "cwd")
	s.MaxResponseBytes = p.maxResponseBytes(m)
	s.Routing = p.serverRouting(m["routing"])
	s.Tools = p.tools(m["tools"])
	s.OAuth = p.oauth(m["oauth"])
	s.TaskToolsets = p.taskToolsets(m["task_toolsets"])
	s.HeadersFromContext = p.headersFromContext(m["headers_from_context"], s.Type)
	s.UserAuth = p.userAuth(m["user_auth"], s.Type)
	p.crossFields(s)

	var rawFields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rawFields); err == nil {
		for k, r := range rawFields {
			if !knownServerKeys[k] {
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

// headerNames rejects blank names and two spellings of one header.
func (p *serverParser) headerNames(field string, headers map[string]string) {
	for _, h := range sortedKeys(headers) {
		if strings.TrimSpace(h) == "" {
			p.errorf(field, "must not contain a blank header name")
		}
	}
	p.headerSpellings(field, headers)
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
