package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/api"
)

type env struct {
	bus  *testkit.Bus
	base string
	cfg  string
}

// start runs the api on a free loopback port with responders standing in
// for the services behind it.
func start(t *testing.T, keys []config.APIKey) *env {
	t.Helper()
	b := testkit.StartBus(t)
	peer := b.Connect(t)
	respond := func(subject string, fn func(m *nats.Msg) any) {
		if _, err := peer.Subscribe(subject, func(m *nats.Msg) {
			switch v := fn(m).(type) {
			case *bus.Error:
				body, _ := json.Marshal(bus.ErrorReply{Error: v})
				r := nats.NewMsg(m.Reply)
				r.Data = body
				r.Header.Set(bus.HeaderError, string(v.Code))
				_ = m.RespondMsg(r)
			default:
				body, _ := json.Marshal(v)
				_ = m.Respond(body)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	respond(bus.SubjectToolsList, func(m *nats.Msg) any {
		var req bus.ToolsListRequest
		_ = json.Unmarshal(m.Data, &req)
		return bus.ToolsListReply{Tools: []bus.Tool{{Name: "demo_echo", Server: "demo", OriginalName: "echo"}}, Bind: []string{"demo_echo"}, Promoted: []string{req.UserID}}
	})
	respond(bus.SubjectToolsCall, func(m *nats.Msg) any {
		var req bus.ToolsCallRequest
		_ = json.Unmarshal(m.Data, &req)
		if req.Tool != "demo_echo" {
			return bus.Errorf(bus.CodeNotFound, "tool '%s' is not in the catalog", req.Tool)
		}
		return bus.ToolsCallReply{Tool: req.Tool, Server: "demo", Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"` + req.UserID + `"}`)}}
	})
	cfgPath := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(cfgPath, []byte(`{"mcpServers": {"demo": {"command": "demo"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err := api.New(api.Config{Listen: "127.0.0.1:0", Keys: keys, MaxBodyBytes: 4096, ExtensionsPath: cfgPath},
		api.Deps{Log: observability.Discard(), NC: b.Connect(t), KV: b.KV})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	e := &env{bus: b, base: "http://" + svc.Addr(), cfg: cfgPath}
	testkit.Eventually(t, 10*time.Second, "api readiness", func() bool {
		resp, err := http.Get(e.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return e
}

func (e *env) do(t *testing.T, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: body is not JSON: %s", method, path, raw)
	}
	return resp.StatusCode, out
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestToolsAndCallWithoutKeys(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	status, body := e.do(t, "GET", "/api/mcp/tools", "", "")
	if status != 200 || fmt.Sprint(body["promoted"]) != "[default]" {
		t.Fatalf("tools: %d %v", status, body)
	}
	status, body = e.do(t, "POST", "/api/mcp/tools/demo_echo/call", "", `{"arguments":{"message":"hi"}}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "default") {
		t.Fatalf("call: %d %v", status, body)
	}
	status, body = e.do(t, "POST", "/api/mcp/tools/nope/call", "", `{}`)
	if status != 404 || errCode(body) != "not_found" {
		t.Fatalf("unknown tool: %d %v", status, body)
	}
	status, body = e.do(t, "POST", "/api/mcp/tools/demo_echo/call", "", `{"arguments":`)
	if status != 400 || errCode(body) != "invalid_request" {
		t.Fatalf("bad json: %d %v", status, body)
	}
	status, body = e.do(t, "POST", "/api/mcp/tools/demo_echo/call", "", `{"arguments":{"x":"`+strings.Repeat("a", 5000)+`"}}`)
	if status != 413 {
		t.Fatalf("oversized body: %d %v", status, body)
	}
	for _, b := range []string{`{"metadata":{"auth_token":"tok-123"}}`, `{"config":{"metadata":{"auth_token":"tok-123"}}}`} {
		status, body = e.do(t, "POST", "/api/mcp/tools/demo_echo/call", "", b)
		if status != 422 || errCode(body) != "invalid_request" || strings.Contains(fmt.Sprint(body), "tok-123") {
			t.Fatalf("metadata.auth_token %s: %d %v", b, status, body)
		}
	}
	status, body = e.do(t, "GET", "/healthz", "", "")
	if status != 200 || body["status"] != "ok" {
		t.Fatalf("healthz: %d %v", status, body)
	}
}

func TestAPIKeysAndRoles(t *testing.T) {
	t.Parallel()
	sum := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	e := start(t, []config.APIKey{
		{SHA256: sum("admin-key"), UserID: "root", Role: "admin"},
		{SHA256: sum("user-key"), UserID: "alice", Role: "user"},
	})
	if status, body := e.do(t, "GET", "/api/mcp/tools", "", ""); status != 401 || errCode(body) != "unauthorized" {
		t.Fatalf("no key: %d %v", status, body)
	}
	if status, body := e.do(t, "GET", "/api/mcp/tools", "wrong", ""); status != 401 {
		t.Fatalf("wrong key: %d %v", status, body)
	}
	status, body := e.do(t, "POST", "/api/mcp/tools/demo_echo/call", "user-key", `{}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "alice") {
		t.Fatalf("user call: %d %v", status, body)
	}
	if status, body := e.do(t, "POST", "/api/mcp/cache/reset", "user-key", ""); status != 403 || errCode(body) != "forbidden" {
		t.Fatalf("user reset: %d %v", status, body)
	}
}

func TestNoKeysRequiresLoopback(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	svc, err := api.New(api.Config{Listen: "0.0.0.0:0"}, api.Deps{NC: b.NC, KV: b.KV})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Listen(); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("listen on 0.0.0.0 without keys: %v", err)
	}
}

func TestConfigFileIsPublishedAndFollowed(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	read := func() sharedstate.ConfigRecord {
		entry, err := e.bus.KV.Get(context.Background(), bus.KVKeyConfig)
		if err != nil {
			t.Fatal(err)
		}
		var rec sharedstate.ConfigRecord
		if err := json.Unmarshal(entry.Value(), &rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	if rec := read(); !strings.Contains(string(rec.Raw), `"demo"`) || rec.Signature.SHA256 == "" {
		t.Fatalf("published record = %+v", rec)
	}
	if err := os.WriteFile(e.cfg, []byte(`{"mcpServers": {"other": {"command": "x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the edited file to be published", func() bool {
		return strings.Contains(string(read().Raw), `"other"`)
	})
}
