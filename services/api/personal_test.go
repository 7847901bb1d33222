package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// personalSecrets are the real secrets used by the personal connection
// tests.
var personalSecrets = []string{"psek-alice-header-11aa", "psek-alice-env-22bb", "psek-bob-header-33cc", "psek-alice-cs-44dd", "psek-alice-new-55ee"}

func TestPersonalConnections(t *testing.T) {
	t.Parallel()
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			e := startWith(t, options{keys: testKeys(), store: st, personal: testPersonal})
			testPersonalConnections(t, e, st)
		})
	}
}

func testPersonalConnections(t *testing.T, e *env, st store.Store) {
	ctx := context.Background()
	// Empty list.
	status, body := e.do(t, "GET", "/api/mcp/personal-connections", aliceKey, "")
	if status != 200 || len(body["connections"].([]any)) != 0 {
		t.Fatalf("empty list: %d %v", status, body)
	}
	// Create.
	ghDef := `{"type": "http", "url": "https://mcp.example/gh", "headers": {"Authorization": "Bearer psek-alice-header-11aa"},
		"oauth": {"token_url": "https://auth.example/token", "grant_type": "refresh_token", "client_id": "c", "client_secret": "psek-alice-cs-44dd"}}`
	status, body = e.do(t, "POST", "/api/mcp/personal-connections", aliceKey, `{"name": "gh", "server": `+ghDef+`}`)
	if status != 201 || body["name"] != "gh" || at(body, "server", "headers", "Authorization") != "***" || at(body, "server", "oauth", "client_secret") != nil {
		t.Fatalf("create: %d %v", status, body)
	}
	rt1, _ := body["runtime_name"].(string)
	if !bus.PersonalRuntimeNamePattern.MatchString(rt1) {
		t.Fatalf("runtime name %q", rt1)
	}
	status, body = e.do(t, "POST", "/api/mcp/personal-connections", aliceKey,
		`{"name": "fs", "server": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem@2025.8.21", "/data"], "env": {"TOKEN": "psek-alice-env-22bb"}}}`)
	if status != 201 || at(body, "server", "env", "TOKEN") != "***" {
		t.Fatalf("create fs: %d %v", status, body)
	}
	// Bob has his own "gh": same name, different runtime name.
	status, body = e.do(t, "POST", "/api/mcp/personal-connections", bobKey,
		`{"name": "gh", "server": {"type": "sse", "url": "https://bob.example/sse", "headers": {"X-Key": "psek-bob-header-33cc"}}}`)
	if status != 201 || body["runtime_name"] == rt1 {
		t.Fatalf("bob create: %d %v", status, body)
	}
	bobRT := body["runtime_name"].(string)

	// Isolation: each sees only their own, secrets masked.
	status, body = e.do(t, "GET", "/api/mcp/personal-connections", aliceKey, "")
	conns := body["connections"].([]any)
	if status != 200 || len(conns) != 2 || at(conns[0], "name") != "fs" || at(conns[1], "name") != "gh" || at(conns[1], "server", "url") != "https://mcp.example/gh" {
		t.Fatalf("alice list: %d %v", status, body)
	}
	status, body = e.do(t, "GET", "/api/mcp/personal-connections", bobKey, "")
	if conns := body["connections"].([]any); status != 200 || len(conns) != 1 || at(conns[0], "server", "url") != "https://bob.example/sse" {
		t.Fatalf("bob list: %d %v", status, body)
	}
	if status, body := e.do(t, "GET", "/api/mcp/personal-connections/fs", bobKey, ""); status != 404 || errCode(body) != "not_found" {
		t.Fatalf("bob reads alice's fs: %d %v", status, body)
	}
	if status, body := e.do(t, "DELETE", "/api/mcp/personal-connections/fs", bobKey, ""); status != 404 {
		t.Fatalf("bob deletes alice's fs: %d %v", status, body)
	}
	if status, body := e.do(t, "GET", "/api/mcp/personal-connections/gh", aliceKey, ""); status != 200 || body["runtime_name"] != rt1 {
		t.Fatalf("alice get gh: %d %v", status, body)
	}

	// The bus contract: the runtime gets alice's servers, unmasked, and no one else's.
	reply, err := bus.Request[bus.PersonalServersReply](ctx, e.bus.NC, e.bus.Names.InternalPersonal(), bus.PersonalServersRequest{UserID: "alice"})
	if err != nil || len(reply.Servers) != 2 || reply.Servers[1].RuntimeName != rt1 {
		t.Fatalf("internal personal: %+v %v", reply, err)
	}
	var def map[string]any
	_ = json.Unmarshal(reply.Servers[1].Definition, &def)
	if at(def, "headers", "Authorization") != "Bearer psek-alice-header-11aa" {
		t.Fatalf("the runtime definition is not the real one: %v", def)
	}
	if _, err := bus.Request[bus.PersonalServersReply](ctx, e.bus.NC, e.bus.Names.InternalPersonal(), bus.PersonalServersRequest{}); !errors.Is(err, bus.ErrInvalidRequest) {
		t.Fatalf("empty user id: %v", err)
	}

	// OAuth chain rows: alice's gh, and a same-key row owned by someone else
	// is never removed.
	putToken := func(key, owner string) {
		t.Helper()
		if _, err := st.Tokens().PutToken(ctx, store.PutTokenParams{Token: store.OAuthToken{ConnectionKey: key, OwnerUserID: owner, TokenType: "Bearer", AccessTokenEnc: []byte{1}}}); err != nil {
			t.Fatal(err)
		}
	}
	hasToken := func(key string) bool {
		_, err := st.Tokens().GetToken(ctx, store.GetTokenParams{Key: key})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	putToken(rt1, "alice")
	putToken(bobRT, "bob")

	// Re-posting the same definition through the masked view keeps the
	// runtime name and the token row.
	status, body = e.do(t, "POST", "/api/mcp/personal-connections", aliceKey,
		`{"name": "gh", "server": {"type": "http", "url": "https://mcp.example/gh", "headers": {"Authorization": "***"},
		"oauth": {"token_url": "https://auth.example/token", "grant_type": "refresh_token", "client_id": "c", "client_secret": null}}}`)
	if status != 200 || body["runtime_name"] != rt1 || !hasToken(rt1) {
		t.Fatalf("unchanged edit: %d %v (token kept: %v)", status, body, hasToken(rt1))
	}
	// At rest the definition is sealed: no secret in the column.
	stored, err := st.Connections().GetConnection(ctx, store.ConnectionParams{UserID: "alice", Name: "gh"})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"psek-alice-header-11aa", "psek-alice-cs-44dd", "mcp.example"} {
		if strings.Contains(string(stored.Definition), secret) {
			t.Fatalf("the stored definition is not sealed: it contains %q", secret)
		}
	}
	// Opened for the services, "***" restored the stored secrets.
	opened, err := bus.Request[bus.PersonalServersReply](ctx, e.bus.NC, e.bus.Names.InternalPersonal(), bus.PersonalServersRequest{UserID: "alice"})
	if err != nil || len(opened.Servers) == 0 {
		t.Fatalf("internal personal: %+v, %v", opened, err)
	}
	_ = json.Unmarshal(opened.Servers[0].Definition, &def)
	if at(def, "headers", "Authorization") != "Bearer psek-alice-header-11aa" || at(def, "oauth", "client_secret") != "psek-alice-cs-44dd" {
		t.Fatalf("\"***\" did not restore the stored secrets: %v", def)
	}
	// A real edit: new runtime name, the old token row is gone.
	status, body = e.do(t, "POST", "/api/mcp/personal-connections", aliceKey,
		`{"name": "gh", "server": {"type": "http", "url": "https://mcp.example/gh2", "headers": {"Authorization": "Bearer psek-alice-new-55ee"}}}`)
	if status != 200 || body["runtime_name"] == rt1 {
		t.Fatalf("edit: %d %v", status, body)
	}
	rt2 := body["runtime_name"].(string)
	if hasToken(rt1) {
		t.Fatalf("the edited connection's token row %s is still there", rt1)
	}
	// Delete: the row goes, bob's stays.
	putToken(rt2, "alice")
	status, body = e.do(t, "DELETE", "/api/mcp/personal-connections/gh", aliceKey, "")
	if status != 200 || body["deleted"] != true || body["runtime_name"] != rt2 {
		t.Fatalf("delete: %d %v", status, body)
	}
	if hasToken(rt2) || !hasToken(bobRT) {
		t.Fatalf("after delete: alice's row present %v, bob's row present %v", hasToken(rt2), hasToken(bobRT))
	}
	if status, _ := e.do(t, "GET", "/api/mcp/personal-connections/gh", aliceKey, ""); status != 404 {
		t.Fatalf("deleted connection still served: %d", status)
	}
	if status, body := e.do(t, "GET", "/api/mcp/personal-connections/gh", bobKey, ""); status != 200 || body["runtime_name"] != bobRT {
		t.Fatalf("bob's gh after alice's delete: %d %v", status, body)
	}
	if status, _ := e.do(t, "DELETE", "/api/mcp/personal-connections/gh", aliceKey, ""); status != 404 {
		t.Fatalf("second delete: %d", status)
	}
	reply, err = bus.Request[bus.PersonalServersReply](ctx, e.bus.NC, e.bus.Names.InternalPersonal(), bus.PersonalServersRequest{UserID: "alice"})
	if err != nil || len(reply.Servers) != 1 || reply.Servers[0].Name != "fs" {
		t.Fatalf("internal personal after delete: %+v %v", reply, err)
	}
	// Admins have personal connections of their own too.
	if status, body := e.do(t, "GET", "/api/mcp/personal-connections", adminKey, ""); status != 200 || len(body["connections"].([]any)) != 0 {
		t.Fatalf("admin list: %d %v", status, body)
	}
	assertNoSecrets(t, e, personalSecrets...)
}

// testPersonal turns personal stdio on with one launch spec: the
// filesystem server at a pinned version, up to four user paths, and TOKEN
// as the one variable a user may set.
var testPersonal = config.PersonalConnections{Stdio: true, Path: config.DefaultPersonalPath,
	LaunchSpecs: []config.LaunchSpec{{Name: "filesystem", Command: "npx",
		Args:     []string{"-y", "@modelcontextprotocol/server-filesystem@2025.8.21", "{paths}"},
		UserArgs: map[string]config.UserArg{"paths": {Pattern: `/[A-Za-z0-9/_.-]*`, Max: 4}},
		UserEnv:  []string{"TOKEN"}}}}

func TestPersonalConnectionRefusals(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	e := startWith(t, options{keys: testKeys(), store: st, personal: testPersonal})
	for _, c := range []struct {
		body   string
		status int
		msg    string
	}{
		{`{"name": "bad name!", "server": {"command": "npx"}}`, 400, "name must be 1 to 64"},
		{`{"name": "x"}`, 422, "server is required"},
		{`{"name": "x", "server": {"command": "bash"}}`, 400, "personal MCP server 'x' command 'bash' is not in any launch spec of this deployment (personal_connections.launch_specs: filesystem)"},
		{`{"name": "x", "server": {"command": "npx", "args": ["-c", "id"]}}`, 400, "personal MCP server 'x' args do not match a launch spec for 'npx'; allowed: npx \"-y\" \"@modelcontextprotocol/server-filesystem@2025.8.21\" {paths: 0..4}"},
		{`{"name": "x", "server": {"command": "npx", "env": {"NODE_OPTIONS": "--require /x"}}}`, 400, "sets environment variable 'NODE_OPTIONS', which changes what runs"},
		{`{"name": "x", "server": {"type": "http", "url": "$MCPBUS_CREDENTIALS_KEY"}}`, 400, "field 'url' starts with '$'"},
		{`{"name": "x", "server": {"type": "http", "url": "http://u", "headers": {"A": "$HOME"}}}`, 400, "field 'headers.A'"},
		{`{"name": "x", "server": {"command": "npx", "cwd": "/etc"}}`, 400, "cannot set cwd"},
		{`{"name": "x", "server": {"type": "ftp", "url": "http://u"}}`, 422, "Invalid MCP server: MCP server 'x': type:"},
		{`{"name": "x", "server": {"type": "http", "url": "http://u", "headers": {"A": "***"}}}`, 400, "Cannot persist masked secret placeholder for MCP server 'x' field 'headers.A'"},
		{`{"name": "x", "server": [1]}`, 422, "must be a JSON object"},
	} {
		status, body := e.do(t, "POST", "/api/mcp/personal-connections", aliceKey, c.body)
		if status != c.status || errCode(body) != "invalid_request" || !strings.Contains(errMessage(body), c.msg) {
			t.Errorf("%s: %d %v, want %d %q", c.body, status, body, c.status, c.msg)
		}
	}
	if rows, err := st.Connections().ListConnections(context.Background(), store.ListConnectionsParams{UserID: "alice"}); err != nil || len(rows) != 0 {
		t.Fatalf("a refused connection was stored: %v %v", rows, err)
	}
}

// TestPersonalStdioLaunchAttacksRefusedAtSave: issue 11 item 1 at save.
// npx running sh, node -e or bash from npm's global bin, or npm_config_call
// (npm's -c) in env, is a 400 naming the field; so is a flag or path
// outside the spec's place, and a variable the spec does not permit.
// Nothing is stored.
func TestPersonalStdioLaunchAttacksRefusedAtSave(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	e := startWith(t, options{keys: testKeys(), store: st, personal: testPersonal})
	const fs = `"-y", "@modelcontextprotocol/server-filesystem@2025.8.21"`
	for _, c := range []struct {
		server, field, value string
	}{
		{`{"command": "npx", "args": ["sh", "-c", "id > /tmp/x; exec npx -y @modelcontextprotocol/server-everything"]}`, "args", ""},
		{`{"command": "npx", "args": ["node", "-e", "require('child_process').execSync('id')"]}`, "args", ""},
		{`{"command": "npx", "args": ["bash"]}`, "args", ""},
		{`{"command": "npx", "args": [], "env": {"npm_config_call": "id > /tmp/x"}}`, "env", "npm_config_call"},
		{`{"command": "npx", "args": [` + fs + `], "env": {"npm_config_call": "id > /tmp/x"}}`, "env", "npm_config_call"},
		{`{"command": "npx", "args": [` + fs + `], "env": {"NPM_CONFIG_USERCONFIG": "/tmp/npmrc"}}`, "env", "NPM_CONFIG_USERCONFIG"},
		{`{"command": "npx", "args": [` + fs + `], "env": {"PATH": "/tmp"}}`, "env", "PATH"},
		{`{"command": "npx", "args": [` + fs + `], "env": {"LD_PRELOAD": "/tmp/x.so"}}`, "env", "LD_PRELOAD"},
		{`{"command": "npx", "args": [` + fs + `], "env": {"PYTHONSTARTUP": "/tmp/x.py"}}`, "env", "PYTHONSTARTUP"},
		{`{"command": "npx", "args": [` + fs + `], "env": {"OTHER": "x"}}`, "env", "OTHER"},
		{`{"command": "npx", "args": [` + fs + `, "--call=id"]}`, "args", ""},
		{`{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem@latest", "/tmp"]}`, "args", ""},
		{`{"command": "npx", "args": [` + fs + `, "/a", "/b", "/c", "/d", "/e"]}`, "args", ""},
		{`{"command": "/usr/bin/npx", "args": [` + fs + `]}`, "command", "/usr/bin/npx"},
	} {
		status, body := e.do(t, "POST", "/api/mcp/personal-connections", aliceKey, `{"name": "x", "server": `+c.server+`}`)
		d, _ := at(body, "error", "details").(map[string]any)
		if status != 400 || errCode(body) != "invalid_request" || d["server"] != "x" || d["field"] != c.field || (c.value != "" && d["value"] != c.value) {
			t.Errorf("%s: %d %v, want 400 naming %s %s", c.server, status, body, c.field, c.value)
		}
		if c.value != "" && !strings.Contains(errMessage(body), "'"+c.value+"'") {
			t.Errorf("%s: message %q does not name %s", c.server, errMessage(body), c.value)
		}
	}
	// The spec itself, with user paths and the permitted variable, is accepted.
	status, body := e.do(t, "POST", "/api/mcp/personal-connections", aliceKey,
		`{"name": "ok", "server": {"command": "npx", "args": [`+fs+`, "/data/a", "/data/b"], "env": {"TOKEN": "t"}}}`)
	if status != 201 {
		t.Fatalf("the launch spec itself: %d %v", status, body)
	}
	if rows, err := st.Connections().ListConnections(context.Background(), store.ListConnectionsParams{UserID: "alice"}); err != nil || len(rows) != 1 {
		t.Fatalf("stored: %v %v, want only the accepted one", rows, err)
	}
}

// TestPersonalStdioOffByDefaultAndWithoutKeys: with personal_connections
// left at its defaults, and in key-less mode even when it is on, a personal
// stdio connection is a 400 on field type; http connections are accepted.
func TestPersonalStdioOffByDefaultAndWithoutKeys(t *testing.T) {
	t.Parallel()
	const def = `{"name": "fs", "server": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem@2025.8.21"]}}`
	for _, c := range []struct {
		name string
		o    options
		key  string
		msg  string
	}{
		{"default", options{keys: testKeys(), store: sqliteStore(t)}, aliceKey, "personal_connections.stdio is false"},
		{"key-less", options{store: sqliteStore(t), personal: testPersonal}, "", "without API keys"},
	} {
		e := startWith(t, c.o)
		status, body := e.do(t, "POST", "/api/mcp/personal-connections", c.key, def)
		if status != 400 || at(body, "error", "details", "field") != "type" || !strings.Contains(errMessage(body), c.msg) {
			t.Errorf("%s: %d %v, want 400 %q", c.name, status, body, c.msg)
		}
		status, body = e.do(t, "POST", "/api/mcp/personal-connections", c.key, `{"name": "web", "server": {"type": "http", "url": "https://mcp.example/x"}}`)
		if status != 201 {
			t.Errorf("%s: http connection: %d %v", c.name, status, body)
		}
	}
}

func TestPersonalWithoutStore(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	if status, body := e.do(t, "GET", "/api/mcp/personal-connections", "", ""); status != 503 || errCode(body) != "unavailable" {
		t.Fatalf("no store: %d %v", status, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := bus.Request[bus.PersonalServersReply](ctx, e.bus.NC, e.bus.Names.InternalPersonal(), bus.PersonalServersRequest{UserID: "u"}); !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("internal without store: %v", err)
	}
}

// TestPersonalChangeEvent checks the change announcement discovery and
// toolcall listen to.
func TestPersonalChangeEvent(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys(), store: sqliteStore(t)})
	sub, err := e.bus.NC.SubscribeSync(e.bus.Names.PersonalEvents("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.bus.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	if status, body := e.do(t, "POST", "/api/mcp/personal-connections", aliceKey, `{"name": "n", "server": {"type": "http", "url": "http://u"}}`); status != 201 {
		t.Fatalf("create: %d %v", status, body)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var req bus.PersonalServersRequest
	if err := json.Unmarshal(msg.Data, &req); err != nil || !reflect.DeepEqual(req, bus.PersonalServersRequest{UserID: "alice"}) {
		t.Fatalf("event %s: %v", msg.Data, err)
	}
}
