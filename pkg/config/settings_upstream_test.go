package config

import (
	"strings"
	"testing"
	"time"
)

func TestUpstreamSettingsLoadAndDefaults(t *testing.T) {
	clearSettingsEnv(t)
	d := DefaultSettings()
	if len(d.Egress.Allow) != 0 || d.Limits.MaxUpstreamResponseBytes != 0 ||
		d.PersonalConnections.MaxSessionInitTimeoutSeconds != 60 || d.PersonalConnections.MaxToolCallTimeoutSeconds != 300 {
		t.Fatalf("defaults: %+v %+v %+v", d.Egress, d.Limits, d.PersonalConnections)
	}
	p := writeFile(t, t.TempDir(), "config.yaml", `
egress:
  allow: ["10.1.2.0/24", "mcp.internal.example"]
limits:
  max_upstream_response_bytes: 1048576
personal_connections:
  max_session_init_timeout_seconds: 20
  max_tool_call_timeout_seconds: 40
`)
	s, err := LoadSettings(p, true, ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	u := s.Upstream(8 << 20)
	if len(u.Egress.Allow) != 2 || u.Limits.MaxUpstreamResponseBytes != 1<<20 || u.PersonalConnections.MaxToolCallTimeoutSeconds != 40 {
		t.Fatalf("loaded %+v", u)
	}
}

func TestUpstreamSettingsValidation(t *testing.T) {
	for _, tc := range []struct {
		edit  func(*Settings)
		field string
	}{
		{func(s *Settings) { s.Egress.Allow = []string{"10.0.0.0/99"} }, "egress.allow"},
		{func(s *Settings) { s.Limits.MaxUpstreamResponseBytes = 10 }, "limits.max_upstream_response_bytes"},
		{func(s *Settings) { s.PersonalConnections.MaxSessionInitTimeoutSeconds = 0 }, "personal_connections.max_session_init_timeout_seconds"},
		{func(s *Settings) { s.PersonalConnections.MaxToolCallTimeoutSeconds = -1 }, "personal_connections.max_tool_call_timeout_seconds"},
	} {
		s := DefaultSettings()
		tc.edit(&s)
		if !hasProblem(s.Validate(), SeverityError, tc.field, "") {
			t.Errorf("no error for %s: %+v", tc.field, s.Problems)
		}
	}
}

// A personal connection's null timeouts become the operator's maxima,
// larger ones are lowered, and its max_response_bytes cannot exceed the
// deployment's cap; a deployment server's own cap wins.
func TestUpstreamClampsPersonalConnections(t *testing.T) {
	ext := parse(t, `{"mcpServers": {
		"p": {"type": "http", "url": "https://x/", "session_init_timeout": null, "tool_call_timeout": 900, "max_response_bytes": 100000000},
		"q": {"type": "http", "url": "https://x/", "session_init_timeout": 5, "tool_call_timeout": 7, "max_response_bytes": 2048},
		"d": {"type": "http", "url": "https://x/", "max_response_bytes": 100000000}}}`)
	u := Upstream{Limits: Limits{MaxUpstreamResponseBytes: 1 << 20}}
	p := u.Personal(ext.Server("p"))
	if p.SessionInitTimeout != 60*time.Second || p.ToolCallTimeout != 300*time.Second || p.MaxResponseBytes != 1<<20 {
		t.Errorf("p clamped to %s %s %d", p.SessionInitTimeout, p.ToolCallTimeout, p.MaxResponseBytes)
	}
	if ext.Server("p").SessionInitTimeout != 0 {
		t.Error("Personal changed the parsed server")
	}
	q := u.Personal(ext.Server("q"))
	if q.SessionInitTimeout != 5*time.Second || q.ToolCallTimeout != 7*time.Second || u.ResponseLimit(q) != 2048 {
		t.Errorf("q = %s %s %d, want its own smaller values", q.SessionInitTimeout, q.ToolCallTimeout, u.ResponseLimit(q))
	}
	if got := u.ResponseLimit(ext.Server("d")); got != 100000000 {
		t.Errorf("deployment server's cap = %d", got)
	}
	if got := (Upstream{BusMaxPayload: 4096}).ResponseLimit(ext.Server("p").withoutCap()); got != 4096 {
		t.Errorf("cap without settings = %d, want the bus's max_payload", got)
	}
}

func TestMaxResponseBytesValidated(t *testing.T) {
	ext := parse(t, withSibling(`{"type": "http", "url": "https://x/", "max_response_bytes": 10}`))
	if !hasProblem(problemsFor(ext, "bad"), SeverityError, "max_response_bytes", "at least 1024") {
		t.Fatalf("problems %+v", ext.Problems)
	}
	if strings.Contains(string(ext.Server("good").Raw), "max_response_bytes") {
		t.Fatal("sibling polluted")
	}
}

func (s *Server) withoutCap() *Server {
	out := *s
	out.MaxResponseBytes = 0
	return &out
}
