package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/api"
)

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
	// The message describes the caller's document from the decoder's
	// typed error: where it breaks, which field has the wrong type.
	for doc, want := range map[string]string{`{"arguments":}`: "at byte 14", `{"thread_id":5}`: `field "thread_id" cannot hold a JSON number`} {
		status, body = e.do(t, "POST", "/api/mcp/tools/demo_echo/call", "", doc)
		if msg := fmt.Sprint(body["error"]); status != 400 || errCode(body) != "invalid_request" || !strings.Contains(msg, want) {
			t.Fatalf("%s: %d %v, want invalid_request saying %q", doc, status, body, want)
		}
	}
	status, body = e.do(t, "POST", "/api/mcp/tools/demo_echo/call", "", `{"arguments":{"x":"`+strings.Repeat("a", 70<<10)+`"}}`)
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
	svc, err := api.New(api.Config{Listen: "0.0.0.0:0"}, api.Deps{NC: b.NC, Names: b.Names, KV: b.KV})
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
