package config

import (
	"strings"
	"testing"
)

func TestBadServerSkippedSiblingLoads(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, entry, field, msg string
	}{
		{"not an object", `"oops"`, "", "must be a JSON object"},
		{"unknown transport", `{"type": "websocket", "url": "http://x"}`, "type", "unsupported transport"},
		{"transport is case-sensitive", `{"type": "HTTP", "url": "http://x"}`, "type", "unsupported transport"},
		{"bad alias", `{"transport": "grpc", "url": "http://x"}`, "transport", "unsupported transport"},
		{"type not string", `{"type": 1, "command": "x"}`, "type", "must be a string"},
		{"stdio without command", `{"type": "stdio"}`, "command", "requires a non-empty 'command'"},
		{"stdio blank command", `{"command": ""}`, "command", "requires a non-empty 'command'"},
		{"http without url", `{"type": "http"}`, "url", "the http transport requires"},
		{"sse without url", `{"type": "sse", "url": ""}`, "url", "the sse transport requires"},
		{"enabled not bool", `{"command": "x", "enabled": "yes"}`, "enabled", "must be true or false"},
		{"prefix not bool", `{"command": "x", "tool_name_prefix": 1}`, "tool_name_prefix", "must be true or false"},
		{"args not list", `{"command": "x", "args": "a b"}`, "args", "must be a list"},
		{"args entry", `{"command": "x", "args": ["a", 2]}`, "args[1]", "must be a string"},
		{"env value not string", `{"command": "x", "env": {"N": 1}}`, "env", "key 'N'"},
		{"routing mode", `{"command": "x", "routing": {"mode": "always"}}`, "routing.mode", "'off' or 'prefer'"},
		{"routing unknown key", `{"command": "x", "routing": {"mode": "off", "weight": 1}}`, "routing.weight", "unknown key"},
		{"routing priority fraction", `{"command": "x", "routing": {"priority": 1.5}}`, "routing.priority", "integer"},
		{"routing keywords", `{"command": "x", "routing": {"keywords": "sql"}}`, "routing.keywords", "list"},
		{"tool override mode", `{"command": "x", "tools": {"q": {"routing": {"mode": "on"}}}}`, "tools.q.routing.mode", "'off' or 'prefer'"},
		{"tool override unknown routing key", `{"command": "x", "tools": {"q": {"routing": {"x": 1}}}}`, "tools.q.routing.x", "unknown key"},
		{"header two spellings", `{"type": "http", "url": "http://x", "headers": {"X-Api-Key": "a", "x-api-key": "b"}}`, "headers", "two spellings ('X-Api-Key' and 'x-api-key')"},
		{"blank static header", `{"type": "http", "url": "http://x", "headers": {" ": "a"}}`, "headers", "blank header name"},
		{"hfc two spellings", `{"type": "http", "url": "http://x", "headers_from_context": {"headers": {"Authorization": "a", "AUTHORIZATION": "b"}}}`, "headers_from_context.headers", "two spellings"},
		{"hfc blank header", `{"type": "sse", "url": "http://x", "headers_from_context": {"headers": {"": "k"}}}`, "headers_from_context.headers", "blank header name"},
		{"hfc blank key", `{"type": "http", "url": "http://x", "headers_from_context": {"headers": {"X-T": "  "}}}`, "headers_from_context.headers", "header 'X-T' must name a non-blank secret key"},
		{"hfc key not string", `{"type": "http", "url": "http://x", "headers_from_context": {"headers": {"X-T": 5}}}`, "headers_from_context.headers", "non-blank secret key"},
		{"hfc on_missing", `{"type": "http", "url": "http://x", "headers_from_context": {"headers": {"X": "k"}, "on_missing": "allow"}}`, "headers_from_context.on_missing", "'deny' or 'passthrough'"},
		{"hfc enabled type", `{"type": "http", "url": "http://x", "headers_from_context": {"enabled": "true"}}`, "headers_from_context.enabled", "true or false"},
		{"user_auth blank header", `{"type": "http", "url": "http://x", "user_auth": {"header": " ", "users": {}}}`, "user_auth.header", "must not be blank"},
		{"user_auth on_missing", `{"type": "http", "url": "http://x", "user_auth": {"on_missing": "ALLOW"}}`, "user_auth.on_missing", "'deny' or 'passthrough'"},
		{"user_auth users value", `{"type": "http", "url": "http://x", "user_auth": {"users": {"u1": 5}}}`, "user_auth.users", "key 'u1'"},
		{"oauth grant", `{"type": "http", "url": "http://x", "oauth": {"token_url": "http://t", "grant_type": "password"}}`, "oauth.grant_type", "client_credentials"},
		{"oauth no token_url", `{"type": "http", "url": "http://x", "oauth": {"client_id": "c"}}`, "oauth.token_url", "required"},
		{"oauth connect value", `{"type": "http", "url": "http://x", "oauth": {"grant_type": "authorization_code", "connect": "everyone"}}`, "oauth.connect", "'per_user' or 'shared'"},
		{"oauth connect needs authorization_code", `{"type": "http", "url": "http://x", "oauth": {"token_url": "http://t", "connect": "shared"}}`, "oauth.connect", "authorization_code"},
		{"oauth auth method", `{"type": "http", "url": "http://x", "oauth": {"grant_type": "authorization_code", "client_id": "c", "token_endpoint_auth_method": "private_key_jwt"}}`, "oauth.token_endpoint_auth_method", "client_secret_basic"},
		{"oauth not object", `{"type": "http", "url": "http://x", "oauth": true}`, "oauth", "must be an object"},
		{"oauth skew not int", `{"type": "http", "url": "http://x", "oauth": {"token_url": "t", "refresh_skew_seconds": "60"}}`, "oauth.refresh_skew_seconds", "integer"},
		{"negative init timeout", `{"command": "x", "session_init_timeout": -1}`, "session_init_timeout", "negative"},
		{"negative call timeout", `{"command": "x", "tool_call_timeout": -0.5}`, "tool_call_timeout", "negative"},
		{"timeout not number", `{"command": "x", "tool_call_timeout": "30"}`, "tool_call_timeout", "number of seconds"},
		{"toolsets not list", `{"command": "x", "task_toolsets": {}}`, "task_toolsets", "must be a list"},
		{"toolset blank name", `{"command": "x", "task_toolsets": [{"name": " ", "submit_tool": "a", "status_tool": "b", "cancel_tool": "c"}]}`, "task_toolsets[0].name", "1 to 255"},
		{"toolset long name", `{"command": "x", "task_toolsets": [{"name": "` + strings.Repeat("n", 256) + `", "submit_tool": "a", "status_tool": "b", "cancel_tool": "c"}]}`, "task_toolsets[0].name", "1 to 255"},
		{"toolset empty tool", `{"command": "x", "task_toolsets": [{"name": "t", "submit_tool": "", "status_tool": "b", "cancel_tool": "c"}]}`, "task_toolsets[0].submit_tool", "at least 1 character"},
		{"toolset missing tool", `{"command": "x", "task_toolsets": [{"name": "t", "submit_tool": "a", "status_tool": "b"}]}`, "task_toolsets[0].cancel_tool", "at least 1 character"},
		{"toolset unknown key", `{"command": "x", "task_toolsets": [{"name": "t", "submit_tool": "a", "status_tool": "b", "cancel_tool": "c", "poll": 1}]}`, "task_toolsets[0].poll", "unknown key"},
		{"toolset tool reused in group", `{"command": "x", "task_toolsets": [{"name": "t", "submit_tool": "a", "status_tool": "a", "cancel_tool": "c"}]}`, "task_toolsets[0].status_tool", "configured as both t.submit_tool and t.status_tool"},
		{"toolset tool reused across groups", `{"command": "x", "task_toolsets": [{"name": "t1", "submit_tool": "a", "status_tool": "b", "cancel_tool": "c"}, {"name": "t2", "submit_tool": "d", "status_tool": "e", "cancel_tool": "b"}]}`, "task_toolsets[1].cancel_tool", "t1.status_tool and t2.cancel_tool"},
		{"toolset duplicate name", `{"command": "x", "task_toolsets": [{"name": "t", "submit_tool": "a", "status_tool": "b", "cancel_tool": "c"}, {"name": "t", "submit_tool": "d", "status_tool": "e", "cancel_tool": "f"}]}`, "task_toolsets[1].name", "more than once"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ext := parse(t, withSibling(tc.entry))
			if ext.Server("bad") != nil {
				t.Fatal("bad server must be skipped")
			}
			if ext.Server("good") == nil {
				t.Fatalf("good sibling must load: %v", ext.Problems)
			}
			ps := problemsFor(ext, "bad")
			found := false
			for _, p := range ps {
				if p.Severity == SeverityError && p.Field == tc.field && strings.Contains(p.Message, tc.msg) && p.File == "ext.json" {
					found = true
				}
			}
			if !found {
				t.Fatalf("want error field %q containing %q, got %v", tc.field, tc.msg, ps)
			}
			if len(problemsFor(ext, "good")) != 0 {
				t.Fatalf("good sibling has problems: %v", ext.Problems)
			}
		})
	}
}

func TestTaskServerName(t *testing.T) {
	t.Parallel()
	ts := `"task_toolsets": [{"name": "t", "submit_tool": "a", "status_tool": "b", "cancel_tool": "c"}]`
	long := strings.Repeat("s", 129)
	ext := parse(t, `{"mcpServers": {"`+long+`": {"command": "x", `+ts+`}, "`+long[:128]+`": {"command": "x", `+ts+`}, " ": {"command": "x", `+ts+`}, "`+long+`x": {"command": "x"}}}`)
	if got := names(ext.Servers); len(got) != 2 || got[0] != long[:128] || got[1] != long+"x" {
		t.Fatalf("want the 128-char task server and the long non-task server, got %v", got)
	}
	if !hasProblem(problemsFor(ext, long), SeverityError, "task_toolsets", "1 to 128") || !hasProblem(problemsFor(ext, " "), SeverityError, "task_toolsets", "1 to 128") {
		t.Fatalf("problems: %v", ext.Problems)
	}
	s := ext.Server(long[:128])
	if !s.TaskEnabled() || s.TaskToolsets[0] != (TaskToolset{Name: "t", SubmitTool: "a", StatusTool: "b", CancelTool: "c"}) {
		t.Fatalf("toolsets %+v", s.TaskToolsets)
	}
}

func TestWarningsKeepServer(t *testing.T) {
	t.Parallel()
	ts := `"task_toolsets": [{"name": "t", "submit_tool": "a", "status_tool": "b", "cancel_tool": "c"}]`
	cases := []struct {
		name, entry, field, msg string
		check                   func(*Server) bool
	}{
		{"priority below", `{"command": "x", "routing": {"priority": -3}}`, "routing.priority", "below 0; clamping to 0", func(s *Server) bool { return s.Routing.Priority == 0 }},
		{"priority above", `{"command": "x", "routing": {"priority": 250}}`, "routing.priority", "above 100; clamping to 100", func(s *Server) bool { return s.Routing.Priority == 100 }},
		{"tool priority above", `{"command": "x", "tools": {"q": {"routing": {"priority": 101}}}}`, "tools.q.routing.priority", "clamping to 100", func(s *Server) bool { return *s.Tools["q"].Routing.Priority == 100 }},
		{"hfc on stdio", `{"command": "x", "headers_from_context": {"headers": {"X": "k"}}}`, "headers_from_context", "ignored", func(s *Server) bool { return s.HeadersFromContext == nil }},
		{"hfc on stdio even if malformed", `{"command": "x", "headers_from_context": 7}`, "headers_from_context", "ignored", func(s *Server) bool { return s.HeadersFromContext == nil }},
		{"user_auth on stdio", `{"command": "x", "user_auth": {"users": {"u": "c"}}}`, "user_auth", "ignored", func(s *Server) bool { return s.UserAuth == nil }},
		{"hfc and user_auth on task server", `{"type": "http", "url": "http://x", ` + ts + `, "headers_from_context": {"headers": {"X": "k"}}, "user_auth": {"users": {}}}`, "headers_from_context", "user_auth", func(s *Server) bool { return s.HeadersFromContext != nil && s.UserAuth != nil }},
		{"hfc on task server", `{"type": "http", "url": "http://x", ` + ts + `, "headers_from_context": {"headers": {"X": "k"}}}`, "headers_from_context", "polls skip it", func(s *Server) bool { return s.TaskEnabled() }},
		{"oauth unknown key", `{"type": "http", "url": "http://x", "oauth": {"token_url": "http://t", "vendor_hint": "u"}}`, "oauth.vendor_hint", "unknown key", func(s *Server) bool { return s.OAuth.TokenURL == "http://t" }},
		{"tool override unknown key", `{"command": "x", "tools": {"q": {"desc": "d"}}}`, "tools.q.desc", "unknown key", func(s *Server) bool { return s.Tools["q"].Routing == nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ext := parse(t, withSibling(tc.entry))
			s := ext.Server("bad")
			if s == nil {
				t.Fatalf("server must load with a warning: %v", ext.Problems)
			}
			ps := problemsFor(ext, "bad")
			if !hasProblem(ps, SeverityWarning, tc.field, tc.msg) {
				t.Fatalf("want warning %q/%q, got %v", tc.field, tc.msg, ps)
			}
			if HasErrors(ps) {
				t.Fatalf("unexpected errors: %v", ps)
			}
			if !tc.check(s) {
				t.Fatalf("check failed: %+v", s)
			}
		})
	}
}

func TestOAuthValues(t *testing.T) {
	t.Parallel()
	ext := parse(t, `{"mcpServers": {"o": {"type": "http", "url": "http://o", "oauth": {
		"enabled": false, "grant_type": "refresh_token", "refresh_token": "r", "client_id": "c", "client_secret": "s",
		"scope": "sc", "audience": "au", "token_field": "tf", "token_type_field": "ttf", "expires_in_field": "eif",
		"default_token_type": "Mac", "refresh_skew_seconds": 30, "extra_token_params": {"resource": "res"}}}}}`)
	o := ext.Server("o").OAuth
	want := OAuth{Enabled: false, GrantType: GrantRefreshToken, RefreshToken: "r", ClientID: "c", ClientSecret: "s",
		Scope: "sc", Audience: "au", TokenField: "tf", TokenTypeField: "ttf", ExpiresInField: "eif",
		DefaultTokenType: "Mac", RefreshSkewSeconds: 30, ExtraTokenParams: map[string]string{"resource": "res"}}
	if o.TokenURL != "" || o.Enabled || o.GrantType != want.GrantType || o.ExtraTokenParams["resource"] != "res" ||
		o.DefaultTokenType != "Mac" || o.RefreshSkewSeconds != 30 || o.TokenField != "tf" || o.Audience != "au" {
		t.Fatalf("got %+v, want %+v", *o, want)
	}
	if ext.Server("o").OAuthEnabled() {
		t.Fatal("disabled oauth")
	}
}

func TestProblemsNeverContainSecretValues(t *testing.T) {
	const secret = "S3CR3T-d0-n0t-l3ak"
	t.Setenv("MCPBUS_T_SECRET", secret)
	doc := `{"mcpServers": {
	  "a": {"type": "http", "url": "", "headers": {"Authorization": "Bearer ` + secret + `", "authorization": "$MCPBUS_T_SECRET"},
	        "env": {"TOKEN": "` + secret + `", "N": 1}},
	  "b": {"type": "http", "url": "http://b", "oauth": {"client_secret": "` + secret + `", "grant_type": "bogus", "extra_token_params": {"k": "` + secret + `", "n": 2}},
	        "user_auth": {"header": "", "users": {"u1": "` + secret + `", "u2": 3}},
	        "headers_from_context": {"headers": {"X": "", "x": "` + secret + `"}}},
	  "c": {"command": "x", "env": {"K": "$MCPBUS_T_SECRET"}, "args": ["` + secret + `", 4],
	        "headers_from_context": {"headers": {"A": "` + secret + `"}}, "routing": {"mode": "bad"}, "tool_call_timeout": -1}
	}}`
	ext := parse(t, doc)
	if len(ext.Servers) != 0 {
		t.Fatalf("all servers are bad, loaded %v", names(ext.Servers))
	}
	if len(ext.Problems) < 8 {
		t.Fatalf("expected many problems, got %v", ext.Problems)
	}
	for _, p := range ext.Problems {
		if strings.Contains(p.String(), secret) || strings.Contains(p.Field, secret) {
			t.Fatalf("problem leaks a secret: %s", p)
		}
	}
}

// TestAuthorizationCodeNeedsNoTokenURL: a server whose accounts people
// connect takes its endpoints from its metadata; connect defaults to
// per_user.
func TestAuthorizationCodeNeedsNoTokenURL(t *testing.T) {
	t.Parallel()
	ext := parse(t, `{"mcpServers": {"gh": {"type": "http", "url": "https://x/mcp", "oauth": {"grant_type": "authorization_code"}}}}`)
	srv := ext.Server("gh")
	if srv == nil || !srv.ConnectsAccounts() || srv.OAuth.Connect != ConnectPerUser {
		t.Fatalf("server %+v, problems %v", srv, ext.Problems)
	}
}

func TestServerPinningKey(t *testing.T) {
	ext, err := ParseExtensions("x.json", []byte(`{"mcpServers": {
		"good": {"type": "http", "url": "http://127.0.0.1:1/mcp", "pinning": "block"},
		"bad": {"type": "http", "url": "http://127.0.0.1:1/mcp", "pinning": "maybe"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := ext.Server("good"); s == nil || s.Pinning != "block" {
		t.Fatalf("good: %+v", s)
	}
	if ext.Server("bad") != nil {
		t.Fatal("a server with an unknown pinning policy was loaded")
	}
	found := false
	for _, p := range ext.Problems {
		if p.Server == "bad" && p.Field == "pinning" && strings.Contains(p.Message, "require_approval") {
			found = true
		}
	}
	if !found {
		t.Fatalf("want a problem naming bad's pinning field and the policies, got %+v", ext.Problems)
	}
}

// TestServerQuotasKey: a server's quotas are read as written, and each bad
// value is refused naming the server and the quota's field.
func TestServerQuotasKey(t *testing.T) {
	ext, err := ParseExtensions("x.json", []byte(`{"mcpServers": {
		"good": {"type": "http", "url": "http://127.0.0.1:1/mcp", "quotas": [{"calls": 5, "interval_seconds": 60}, {"concurrent": 2}]},
		"neither": {"type": "http", "url": "http://127.0.0.1:1/mcp", "quotas": [{}]},
		"nointerval": {"type": "http", "url": "http://127.0.0.1:1/mcp", "quotas": [{"calls": 5}]},
		"longinterval": {"type": "http", "url": "http://127.0.0.1:1/mcp", "quotas": [{"calls": 5, "interval_seconds": 86401}]},
		"negative": {"type": "http", "url": "http://127.0.0.1:1/mcp", "quotas": [{"concurrent": 1}, {"concurrent": -1}]},
		"toomany": {"type": "http", "url": "http://127.0.0.1:1/mcp", "quotas": [{"concurrent": 1001}]},
		"fraction": {"type": "http", "url": "http://127.0.0.1:1/mcp", "quotas": [{"calls": 1.5, "interval_seconds": 60}]},
		"tools": {"type": "http", "url": "http://127.0.0.1:1/mcp", "quotas": [{"tools": ["x"], "concurrent": 1}]},
		"notalist": {"type": "http", "url": "http://127.0.0.1:1/mcp", "quotas": {"concurrent": 1}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := ext.Server("good"); s == nil || len(s.Quotas) != 2 || s.Quotas[0].Calls != 5 || s.Quotas[0].IntervalSeconds != 60 || s.Quotas[1].Concurrent != 2 {
		t.Fatalf("good: %+v", s)
	}
	for server, field := range map[string]string{
		"neither": "quotas[0]", "nointerval": "quotas[0].interval_seconds", "longinterval": "quotas[0].interval_seconds",
		"negative": "quotas[1].concurrent", "toomany": "quotas[0].concurrent", "fraction": "quotas[0].calls", "tools": "quotas[0].tools", "notalist": "quotas",
	} {
		if ext.Server(server) != nil {
			t.Errorf("%s was loaded", server)
		}
		found := false
		for _, p := range ext.Problems {
			if p.Server == server && p.Field == field && p.Severity == SeverityError {
				found = true
			}
		}
		if !found {
			t.Errorf("want an error naming %s's %s, got %+v", server, field, ext.Problems)
		}
	}
}
