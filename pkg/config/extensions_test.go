package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFindExtensionsPath(t *testing.T) {
	// t.Setenv: not parallel.
	cases := []struct {
		name, flag, mcpbusEnv, deerEnv string
		want                           string
		explicit                       bool
	}{
		{"flag wins", "f.json", "m.json", "d.json", "f.json", true},
		{"mcpbus env", "", "m.json", "d.json", "m.json", true},
		{"deerflow env", "", "", "d.json", "d.json", true},
		{"default", "", "", "", DefaultExtensionsFile, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvExtensionsConfig, tc.mcpbusEnv)
			t.Setenv(EnvDeerFlowExtensionsPath, tc.deerEnv)
			got, explicit := FindExtensionsPath(tc.flag, ReadEnv())
			if got != tc.want || explicit != tc.explicit {
				t.Fatalf("got (%q, %v), want (%q, %v)", got, explicit, tc.want, tc.explicit)
			}
		})
	}
}

func TestLoadExtensionsMissing(t *testing.T) {
	t.Setenv(EnvExtensionsConfig, "")
	t.Setenv(EnvDeerFlowExtensionsPath, "")
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.json")

	ext, err := LoadExtensions(missing, false, ReadEnv())
	if err != nil {
		t.Fatalf("non-explicit missing: %v", err)
	}
	if ext.Path != "" || len(ext.Servers) != 0 || len(ext.Problems) != 0 {
		t.Fatalf("want empty extensions, got %+v", ext)
	}

	_, err = LoadExtensions(missing, true, ReadEnv())
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "--extensions-config") {
		t.Fatalf("explicit missing: want error naming path and flag, got %v", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("want fs.ErrNotExist in chain, got %v", err)
	}

	t.Setenv(EnvDeerFlowExtensionsPath, missing)
	_, err = LoadExtensions(missing, true, ReadEnv())
	if err == nil || !strings.Contains(err.Error(), EnvDeerFlowExtensionsPath) {
		t.Fatalf("env missing: want error naming the variable, got %v", err)
	}
}

func TestLoadExtensionsReadsFile(t *testing.T) {
	t.Parallel()
	p := writeFile(t, t.TempDir(), "e.json", `{"mcpServers": {"a": {"command": "x"}}}`)
	ext, err := LoadExtensions(p, true, ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	if ext.Path != p || len(ext.Servers) != 1 {
		t.Fatalf("got %+v", ext)
	}
}

func TestParseExtensionsFileErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"bad json position", "{\n  \"mcpServers\": {\n    \"a\": {,}\n  }\n}", []string{"ext.json", "line 3", "column 11", "not valid JSON"}},
		{"truncated", "{\n  \"mcpServers\": {", []string{"ext.json", "line 2", "not valid JSON"}},
		{"empty file", "", []string{"ext.json", "not valid JSON"}},
		{"array top level", `[1, 2]`, []string{"ext.json", "top level must be a JSON object", "an array"}},
		{"servers not object", `{"mcpServers": []}`, []string{"ext.json", "mcpServers must be a JSON object"}},
		{"servers null", `{"mcpServers": null}`, []string{"mcpServers must be a JSON object", "null"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseExtensions("ext.json", []byte(tc.doc))
			if err == nil {
				t.Fatal("want error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseExtensionsKeepsFileOrder(t *testing.T) {
	t.Parallel()
	ext := parse(t, `{"mcpServers": {
		"zeta": {"command": "z"},
		"alpha": {"command": "a", "enabled": false},
		"mid": {"type": "http", "url": "http://m"},
		"beta": {"command": "b"}
	}}`)
	if got, want := names(ext.Servers), []string{"zeta", "alpha", "mid", "beta"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order: got %v, want %v", got, want)
	}
	if got, want := names(ext.Enabled()), []string{"zeta", "mid", "beta"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("enabled: got %v, want %v", got, want)
	}
	if ext.Server("mid") == nil || ext.Server("missing") != nil {
		t.Fatal("Server lookup")
	}
}

func TestParseExtensionsDuplicateServerName(t *testing.T) {
	t.Parallel()
	ext := parse(t, `{"mcpServers": {"a": {"command": "first"}, "b": {"command": "b"}, "a": {"command": "second"}}}`)
	if got := names(ext.Servers); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("got %v", got)
	}
	if ext.Server("a").Command != "second" {
		t.Fatalf("last definition should win, got %q", ext.Server("a").Command)
	}
	if !hasProblem(problemsFor(ext, "a"), SeverityWarning, "", "more than once") {
		t.Fatalf("want duplicate warning, got %v", ext.Problems)
	}
}

func TestParseExtensionsRawTopLevelKept(t *testing.T) {
	t.Setenv("MCPBUS_TEST_SKILL", "expanded")
	doc := `{"mcpServers": {}, "skills": {"s": {"enabled": "$MCPBUS_TEST_SKILL"}}, "middlewares": [1, 2]}`
	ext := parse(t, doc)
	for _, k := range []string{"mcpServers", "skills", "middlewares"} {
		if _, ok := ext.Raw[k]; !ok {
			t.Fatalf("Raw lacks %q", k)
		}
	}
	if !strings.Contains(string(ext.Raw["skills"]), "$MCPBUS_TEST_SKILL") {
		t.Fatalf("Raw must be unexpanded, got %s", ext.Raw["skills"])
	}
}

func TestTransportAlias(t *testing.T) {
	t.Parallel()
	ext := parse(t, `{"mcpServers": {
		"alias": {"transport": "http", "url": "http://a"},
		"both": {"type": "sse", "transport": "http", "url": "http://b"},
		"emptytype": {"type": "", "transport": "sse", "url": "http://c"},
		"default": {"command": "x"}
	}}`)
	want := map[string]string{"alias": "http", "both": "sse", "emptytype": "sse", "default": "stdio"}
	for name, typ := range want {
		s := ext.Server(name)
		if s == nil {
			t.Fatalf("%s not loaded: %v", name, ext.Problems)
		}
		if s.Type != typ {
			t.Errorf("%s: type %q, want %q", name, s.Type, typ)
		}
	}
	if string(ext.Server("alias").Extra["transport"]) != `"http"` {
		t.Fatalf("transport must stay an extra key, got %v", ext.Server("alias").Extra)
	}
	if _, ok := ext.Server("default").Extra["transport"]; ok {
		t.Fatal("no transport extra when absent")
	}
}

func TestUnknownKeysKeptInExtra(t *testing.T) {
	t.Parallel()
	ext := parse(t, `{"mcpServers": {"a": {"command": "x", "customFlag": {"n":  1, "v": "$NOPE"}, "other": [true]}}}`)
	s := ext.Server("a")
	if got := string(s.Extra["customFlag"]); got != `{"n":  1, "v": "$NOPE"}` {
		t.Fatalf("extra not verbatim: %s", got)
	}
	if got := string(s.Extra["other"]); got != `[true]` {
		t.Fatalf("extra: %s", got)
	}
	if _, ok := s.Extra["command"]; ok {
		t.Fatal("typed keys must not be extras")
	}
	// Allowed, with a warning each that says they are not used (a key that
	// looks like a misspelt known key is an error instead: did you mean).
	if len(ext.Problems) != 2 || HasErrors(ext.Problems) || !hasProblem(ext.Problems, SeverityWarning, "customFlag", "not used by mcpbus") {
		t.Fatalf("unknown server keys: %v; want a warning each", ext.Problems)
	}
}

func TestEnvExpansion(t *testing.T) {
	t.Setenv("MCPBUS_T_CMD", "/usr/bin/tool")
	t.Setenv("MCPBUS_T_TOKEN", "tok-123")
	t.Setenv("MCPBUS_T_URL", "https://example.test/mcp")
	t.Setenv("MCPBUS_T_INT", "mod:builder")
	t.Setenv("MCPBUS_T_KEY", "should-not-appear")
	doc := `{
	  "mcpInterceptors": ["$MCPBUS_T_INT", "literal:x"],
	  "mcpServers": {
	    "s": {
	      "command": "$MCPBUS_T_CMD",
	      "args": ["$MCPBUS_T_TOKEN", "--x=$MCPBUS_T_TOKEN", "$MCPBUS_T_UNSET_XYZ"],
	      "env": {"$MCPBUS_T_KEY": "$MCPBUS_T_TOKEN", "PLAIN": "Bearer $MCPBUS_T_TOKEN"},
	      "cwd": "$MCPBUS_T_UNSET_XYZ",
	      "nested": {"deep": ["$MCPBUS_T_TOKEN"]}
	    },
	    "h": {
	      "type": "http", "url": "$MCPBUS_T_URL",
	      "headers": {"Authorization": "Bearer $MCPBUS_T_TOKEN", "X-Key": "$MCPBUS_T_TOKEN", "X-Brace": "${MCPBUS_T_TOKEN}"}
	    }
	  }
	}`
	ext := parse(t, doc)
	s := ext.Server("s")
	if s == nil {
		t.Fatalf("problems: %v", ext.Problems)
	}
	if s.Command != "/usr/bin/tool" {
		t.Errorf("command %q", s.Command)
	}
	if want := []string{"tok-123", "--x=$MCPBUS_T_TOKEN", ""}; !reflect.DeepEqual(s.Args, want) {
		t.Errorf("args %q, want %q", s.Args, want)
	}
	if want := map[string]string{"$MCPBUS_T_KEY": "tok-123", "PLAIN": "Bearer $MCPBUS_T_TOKEN"}; !reflect.DeepEqual(s.Env, want) {
		t.Errorf("env %q (keys must not expand)", s.Env)
	}
	if s.Cwd != "" {
		t.Errorf("unset $VAR cwd should be empty (inherit), got %q", s.Cwd)
	}
	if !strings.Contains(string(s.Raw), `"$MCPBUS_T_CMD"`) || !strings.Contains(string(s.Extra["nested"]), "$MCPBUS_T_TOKEN") {
		t.Errorf("Raw and Extra must be unexpanded")
	}
	h := ext.Server("h")
	if h.URL != "https://example.test/mcp" {
		t.Errorf("url %q", h.URL)
	}
	if want := map[string]string{"Authorization": "Bearer $MCPBUS_T_TOKEN", "X-Key": "tok-123", "X-Brace": ""}; !reflect.DeepEqual(h.Headers, want) {
		t.Errorf("headers %q", h.Headers)
	}
	if want := []string{"mod:builder", "literal:x"}; !reflect.DeepEqual(ext.Interceptors, want) {
		t.Errorf("interceptors %q", ext.Interceptors)
	}
}

func TestEnvExpansionChangesFingerprint(t *testing.T) {
	doc := `{"mcpServers": {"s": {"command": "$MCPBUS_T_FP"}}}`
	t.Setenv("MCPBUS_T_FP", "one")
	a := parse(t, doc).Server("s").Fingerprint
	t.Setenv("MCPBUS_T_FP", "two")
	b := parse(t, doc).Server("s").Fingerprint
	if a == b {
		t.Fatal("fingerprint is over the expanded entry and must change with the variable")
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, fields string
		init, call   time.Duration
	}{
		{"defaults", ``, 60 * time.Second, 0},
		{"null init disables", `"session_init_timeout": null`, 0, 0},
		{"number", `"session_init_timeout": 5, "tool_call_timeout": 30`, 5 * time.Second, 30 * time.Second},
		{"fractional", `"session_init_timeout": 1.5, "tool_call_timeout": 0.25`, 1500 * time.Millisecond, 250 * time.Millisecond},
		{"zero and null call", `"session_init_timeout": 0, "tool_call_timeout": null`, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sep := ""
			if tc.fields != "" {
				sep = ", "
			}
			ext := parse(t, `{"mcpServers": {"s": {"command": "x"`+sep+tc.fields+`}}}`)
			s := ext.Server("s")
			if s == nil {
				t.Fatalf("problems: %v", ext.Problems)
			}
			if s.SessionInitTimeout != tc.init || s.ToolCallTimeout != tc.call {
				t.Fatalf("got init %v call %v, want %v %v", s.SessionInitTimeout, s.ToolCallTimeout, tc.init, tc.call)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	ext := parse(t, `{"mcpServers": {"s": {"command": "x"}, "o": {"type": "http", "url": "http://o",
		"oauth": {"token_url": "http://t", "refresh_skew_seconds": -5},
		"headers_from_context": {"headers": {"X-T": "tenant"}},
		"user_auth": {"users": {"u1": "cred"}}}}}`)
	s := ext.Server("s")
	if !s.Enabled || s.Type != TransportStdio || !s.ToolNamePrefix || s.OAuth != nil ||
		s.Routing.Mode != RoutingOff || s.Routing.Priority != 0 || s.Routing.Keywords == nil || len(s.Routing.Keywords) != 0 ||
		s.TaskToolsets != nil || s.HeadersFromContext != nil || s.UserAuth != nil {
		t.Fatalf("stdio defaults wrong: %+v", s)
	}
	o := ext.Server("o")
	if o == nil {
		t.Fatalf("problems: %v", ext.Problems)
	}
	wantOAuth := OAuth{Enabled: true, TokenURL: "http://t", GrantType: GrantClientCredentials, TokenField: "access_token",
		TokenTypeField: "token_type", ExpiresInField: "expires_in", DefaultTokenType: "Bearer", RefreshSkewSeconds: 0}
	if !reflect.DeepEqual(*o.OAuth, wantOAuth) {
		t.Fatalf("oauth %+v, want %+v", *o.OAuth, wantOAuth)
	}
	if h := o.HeadersFromContext; !h.Enabled || h.OnMissing != OnMissingDeny || h.Headers["X-T"] != "tenant" {
		t.Fatalf("headers_from_context %+v", h)
	}
	if u := o.UserAuth; !u.Enabled || u.OnMissing != OnMissingDeny || u.Header != DefaultUserAuthHeader || u.Users["u1"] != "cred" {
		t.Fatalf("user_auth %+v", u)
	}
	if !o.OAuthEnabled() || s.OAuthEnabled() || s.TaskEnabled() {
		t.Fatal("helpers")
	}
}

func TestRoutingAndTools(t *testing.T) {
	t.Parallel()
	ext := parse(t, `{"mcpServers": {"pg": {"command": "x",
		"routing": {"mode": "prefer", "priority": 50, "keywords": ["orders", "SQL"]},
		"tools": {"query": {"routing": {"priority": 100}}, "plain": {}}}}}`)
	s := ext.Server("pg")
	if s == nil {
		t.Fatal(ext.Problems)
	}
	if want := (Routing{Mode: "prefer", Priority: 50, Keywords: []string{"orders", "SQL"}}); !reflect.DeepEqual(s.Routing, want) {
		t.Fatalf("routing %+v", s.Routing)
	}
	q := s.Tools["query"].Routing
	if q == nil || q.Mode != nil || q.Keywords != nil || q.Priority == nil || *q.Priority != 100 {
		t.Fatalf("override sets only priority, got %+v", q)
	}
	if s.Tools["plain"].Routing != nil {
		t.Fatal("plain has no override")
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	a := parse(t, `{"mcpServers": {"x": {"command": "a", "args": ["1"]}, "y": {"type": "http", "url": "http://y", "custom": 1}}}`)
	b := parse(t, `{"mcpServers": {"y": {"custom": 1, "url": "http://y", "type": "http"},
		"x": {"args": ["1"], "command": "a"}}}`)
	for _, n := range []string{"x", "y"} {
		if a.Server(n).Fingerprint != b.Server(n).Fingerprint {
			t.Errorf("%s: reordering changed the fingerprint", n)
		}
		if len(a.Server(n).Fingerprint) != 64 {
			t.Errorf("fingerprint not hex sha256: %q", a.Server(n).Fingerprint)
		}
	}
	edits := []string{
		`{"mcpServers": {"y": {"type": "http", "url": "http://y", "custom": 2}}}`,
		`{"mcpServers": {"y": {"type": "http", "url": "http://y2", "custom": 1}}}`,
		`{"mcpServers": {"y": {"type": "http", "url": "http://y", "custom": 1, "description": "d"}}}`,
		`{"mcpServers": {"y": {"type": "http", "url": "http://y", "custom": 1, "enabled": false}}}`,
	}
	for _, doc := range edits {
		if got := parse(t, doc).Server("y").Fingerprint; got == a.Server("y").Fingerprint {
			t.Errorf("edit %s did not change the fingerprint", doc)
		}
	}
}

func TestInterceptors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, value string
		want        []string
		warn        bool
	}{
		{"list", `["a:b", "c:d"]`, []string{"a:b", "c:d"}, false},
		{"single string", `"a:b"`, []string{"a:b"}, false},
		{"null", `null`, nil, false},
		{"number", `5`, nil, true},
		{"object", `{"a": 1}`, nil, true},
		{"bad entry", `["a:b", 3]`, []string{"a:b"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ext := parse(t, `{"mcpInterceptors": `+tc.value+`}`)
			if !reflect.DeepEqual(ext.Interceptors, tc.want) {
				t.Fatalf("got %q, want %q", ext.Interceptors, tc.want)
			}
			if got := hasProblem(ext.Problems, SeverityWarning, "mcpInterceptors", ""); got != tc.warn {
				t.Fatalf("warning %v, want %v: %v", got, tc.warn, ext.Problems)
			}
		})
	}
	a := parse(t, `{"mcpInterceptors": ["a:b"]}`).InterceptorsFingerprint()
	b := parse(t, `{"mcpInterceptors": "a:b"}`).InterceptorsFingerprint()
	c := parse(t, `{"mcpInterceptors": ["a:c"]}`).InterceptorsFingerprint()
	if a != b || a == c {
		t.Fatal("interceptors fingerprint: single string equals one-entry list; an edit changes it")
	}
}

func TestValidateCwd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := writeFile(t, dir, "f", "x")
	cases := []struct {
		cwd     string
		wantErr bool
	}{
		{"", false},
		{dir, false},
		{filepath.Join(dir, "missing"), true},
		{file, true},
	}
	for _, tc := range cases {
		err := (&Server{Name: "srv", Cwd: tc.cwd}).ValidateCwd()
		if (err != nil) != tc.wantErr {
			t.Errorf("cwd %q: err %v", tc.cwd, err)
		}
		if err != nil && !strings.Contains(err.Error(), "'srv'") {
			t.Errorf("error must name the server: %v", err)
		}
	}
}

func TestProblemJSONAndString(t *testing.T) {
	t.Parallel()
	p := Problem{File: "f.json", Server: "s", Field: "url", Message: "m", Severity: SeverityError}
	if p.String() != "f.json: server 's': url: m" {
		t.Fatalf("String: %q", p.String())
	}
	b, _ := json.Marshal(p)
	if !strings.Contains(string(b), `"severity":"error"`) {
		t.Fatalf("json: %s", b)
	}
	if !HasErrors([]Problem{p}) || HasErrors([]Problem{{Severity: SeverityWarning}}) {
		t.Fatal("HasErrors")
	}
	if ErrorOf([]Problem{{Severity: SeverityWarning}}) != nil || ErrorOf([]Problem{p}) == nil {
		t.Fatal("ErrorOf")
	}
}
