package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// exampleConfig is the shipped example extensions file.
func exampleConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "extensions_config.example.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestConfigAPIShippedExampleRoundTrips is the operator's first edit: GET
// the shipped example, add a server like its demo server (a relative
// command with a single-dash flag), PUT it back; the operator's own file is
// not judged by a launch policy.
func TestConfigAPIShippedExampleRoundTrips(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{configDoc: exampleConfig(t)})
	status, body := e.do(t, "GET", "/api/mcp/config", "", "")
	if status != 200 {
		t.Fatalf("GET: %d %v", status, body)
	}
	srvs := servers(t, body)
	sent, _ := json.Marshal(map[string]any{"mcp_servers": srvs})
	if status, body := e.do(t, "PUT", "/api/mcp/config", "", string(sent)); status != 200 {
		t.Fatalf("PUT of the example as read: %d %v", status, body)
	}
	srvs["demo2"] = map[string]any{"type": "stdio", "command": "./bin/demo-server", "args": []any{"-transport", "stdio"}}
	sent, _ = json.Marshal(map[string]any{"mcp_servers": srvs})
	status, body = e.do(t, "PUT", "/api/mcp/config", "", string(sent))
	if status != 200 || at(body, "mcp_servers", "demo2", "command") != "./bin/demo-server" {
		t.Fatalf("PUT adding a server like the example's: %d %v", status, body)
	}
	file := decodeFile(t, e.cfg)
	if !reflect.DeepEqual(at(file, "mcpServers", "demo2", "args"), []any{"-transport", "stdio"}) ||
		!reflect.DeepEqual(at(file, "mcpServers", "demo"), at(decodeDoc(t, exampleConfig(t)), "mcpServers", "demo")) {
		t.Fatalf("file after the PUT: %v", file)
	}
}

func decodeDoc(t *testing.T, doc string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(doc), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConfigAPIUnchangedServersAreNotJudgedAgain: a server already in the
// file with a mistake does not block edits of the others; changing it is
// judged.
func TestConfigAPIUnchangedServersAreNotJudgedAgain(t *testing.T) {
	t.Parallel()
	doc := `{"mcpServers": {"old": {"type": "http", "url": "ftp://files"}, "a": {"command": "x"}}}`
	e := startWith(t, options{configDoc: doc})
	status, body := e.do(t, "PUT", "/api/mcp/config", "", `{"mcp_servers": {"old": {"type": "http", "url": "ftp://files"}, "a": {"command": "y"}}}`)
	if status != 200 || at(body, "mcp_servers", "a", "command") != "y" {
		t.Fatalf("PUT changing only a: %d %v", status, body)
	}
	status, body = e.do(t, "PUT", "/api/mcp/config", "", `{"mcp_servers": {"old": {"type": "http", "url": "ftp://other"}, "a": {"command": "y"}}}`)
	if status != 422 || !strings.Contains(errMessage(body), "MCP server 'old': url: must use http or https") {
		t.Fatalf("PUT changing old: %d %v", status, body)
	}
	// Disabling it is never refused for its content; enabling it again is.
	if status, body := e.do(t, "PATCH", "/api/mcp/config", "", `{"server_name": "old", "enabled": false}`); status != 200 || at(body, "mcp_servers", "old", "enabled") != false {
		t.Fatalf("PATCH disabling old: %d %v", status, body)
	}
	if status, body := e.do(t, "PATCH", "/api/mcp/config", "", `{"server_name": "old", "enabled": true}`); status != 422 {
		t.Fatalf("PATCH enabling old: %d %v", status, body)
	}
}

// taskDoc has a task-enabled stdio server (the shipped example's demo) and
// a plain http server.
const taskDoc = `{"mcpServers": {
  "demo": {"command": "./bin/demo-server", "args": ["-transport", "stdio"],
    "task_toolsets": [{"name": "reports", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]},
  "web": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}`

// TestConfigAPITaskServerChangeNeedsRestart: changing the args of a
// task-enabled server is refused up front with 409 naming the server, the
// field and what to do, and nothing is written or published; a change of
// its description (hot), of another server, or disabling it is accepted.
func TestConfigAPITaskServerChangeNeedsRestart(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{configDoc: taskDoc})
	before, _ := os.ReadFile(e.cfg)
	resets := e.resets.Load()
	changed := strings.Replace(taskDoc, `"-transport", "stdio"`, `"-transport", "stdio", "-slow"`, 1)
	status, body := e.do(t, "PUT", "/api/mcp/config", "", mcpServersOf(t, changed))
	if status != 409 || errCode(body) != "config_error" || !strings.Contains(errMessage(body), "MCP server 'demo'") ||
		!strings.Contains(errMessage(body), "args") || !strings.Contains(errMessage(body), "restart mcpbus") ||
		strings.Contains(errMessage(body), "mcpInterceptors") || at(body, "error", "details", "restart_required") != true {
		t.Fatalf("PUT changing demo's args: %d %v", status, body)
	}
	if now, _ := os.ReadFile(e.cfg); !bytes.Equal(now, before) || e.resets.Load() != resets {
		t.Fatalf("a refused PUT wrote the file or reset the caches")
	}
	hot := strings.Replace(taskDoc, `"web": {"type": "http", "url": "http://127.0.0.1:1/mcp"}`, `"web": {"type": "http", "url": "http://127.0.0.1:2/mcp"}`, 1)
	hot = strings.Replace(hot, `"command": "./bin/demo-server"`, `"description": "Reports", "command": "./bin/demo-server"`, 1)
	if status, body := e.do(t, "PUT", "/api/mcp/config", "", mcpServersOf(t, hot)); status != 200 {
		t.Fatalf("PUT changing web and demo's description: %d %v", status, body)
	}
	if status, body := e.do(t, "PATCH", "/api/mcp/config", "", `{"server_name": "demo", "enabled": false}`); status != 200 || at(body, "mcp_servers", "demo", "enabled") != false {
		t.Fatalf("PATCH disabling demo: %d %v", status, body)
	}
}

func mcpServersOf(t *testing.T, doc string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"mcp_servers": decodeDoc(t, doc)["mcpServers"]})
	return string(b)
}

// TestConfigAPIReadOnlyFileRefusesWrites: a config file that cannot be
// written (a ConfigMap mount) is refused with 409 naming the file; the
// service said so at start.
func TestConfigAPIReadOnlyFileRefusesWrites(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{})
	if err := os.Chmod(e.cfg, 0o444); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(e.cfg)
	for _, c := range []struct{ method, body string }{
		{"PUT", `{"mcp_servers": {"u": {"command": "uvx"}}}`},
		{"PATCH", `{"server_name": "demo", "enabled": false}`},
	} {
		status, body := e.do(t, c.method, "/api/mcp/config", "", c.body)
		if status != 409 || errCode(body) != "config_error" || !strings.Contains(errMessage(body), e.cfg) || !strings.Contains(errMessage(body), "read-only") {
			t.Errorf("%s on a read-only file: %d %v", c.method, status, body)
		}
	}
	if now, _ := os.ReadFile(e.cfg); !bytes.Equal(now, before) {
		t.Fatal("the read-only file changed")
	}
	e.runAPI(t) // a replica started on the read-only file
	if !strings.Contains(e.log.String(), "the config API is read-only") {
		t.Error("the start did not say the config API is read-only")
	}
}

// TestConfigAPIAnswers503WhenTheChangeIsNotStored: with the KV bucket gone
// the write answers 503 with a retry hint and the file stays as it was
// (never "written but not published").
func TestConfigAPIAnswers503WhenTheChangeIsNotStored(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{})
	before, _ := os.ReadFile(e.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.bus.JS.DeleteKeyValue(ctx, e.bus.Names.ConfigBucket()); err != nil {
		t.Fatal(err)
	}
	status, body := e.do(t, "PUT", "/api/mcp/config", "", `{"mcp_servers": {"u": {"command": "uvx"}}}`)
	if status != 503 || errCode(body) != "unavailable" || !strings.Contains(errMessage(body), "Retry") {
		t.Fatalf("PUT with no KV bucket: %d %v", status, body)
	}
	if now, _ := os.ReadFile(e.cfg); !bytes.Equal(now, before) {
		t.Fatalf("the file kept a change that was not stored:\n%s", now)
	}
}

// TestConfigAPIAndConfigValidateSameRules: each operator mistake is
// refused by PUT with exactly the message `mcpbus config validate` prints
// for it (config.ValidateFiles, what the command runs).
func TestConfigAPIAndConfigValidateSameRules(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{})
	dir := t.TempDir()
	for _, server := range []string{
		`{"type": "http", "url": "http://h/mcp", "tool_call_timout": 5}`,
		`{"type": "http", "url": "h:8080/mcp"}`,
		`{"type": "sse", "url": "ftp://h/sse"}`,
		`{"type": "http", "url": "http:///mcp"}`,
		`{"type": "http", "url": "http://h/mcp", "headers": {"X Key": "v"}}`,
		`{"command": "x", "oauth": {"token_url": "http://t", "grant_typ": "client_credentials"}}`,
	} {
		path := filepath.Join(dir, "ext.json")
		if err := os.WriteFile(path, []byte(`{"mcpServers": {"s": `+server+`}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		var want string
		for _, p := range config.ValidateFiles(path, true, filepath.Join(dir, "none.yaml"), false, config.EnvOf(nil)) {
			if p.Severity == config.SeverityError && want == "" {
				want = "Invalid MCP configuration: MCP server 's': " + p.Field + ": " + p.Message
			}
		}
		if want == "" {
			t.Errorf("config validate passes %s", server)
			continue
		}
		status, body := e.do(t, "PUT", "/api/mcp/config", "", `{"mcp_servers": {"s": `+server+`}}`)
		if status != 422 || errMessage(body) != want {
			t.Errorf("PUT %s: %d %q, want 422 %q", server, status, errMessage(body), want)
		}
	}
}
