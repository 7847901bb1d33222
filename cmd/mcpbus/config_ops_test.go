package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestConfigChangesNeverStopOtherServers is the operator's steps on a
// running deployment with a task-enabled server (demo) and a plain one
// (plain): disabling demo, a refused change of demo's args, and a hand edit
// of them each leave plain serving, and no answer names mcpInterceptors.
func TestConfigChangesNeverStopOtherServers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + apiAddr
	server := func(args string, tasks bool) map[string]any {
		s := map[string]any{"type": "stdio", "command": demoBin, "args": json.RawMessage(args)}
		if tasks {
			s["task_toolsets"] = []map[string]string{{"name": "reports", "submit_tool": "submit_report",
				"status_tool": "get_report_status", "cancel_tool": "cancel_report"}}
		}
		return s
	}
	doc := func(demoArgs string) string {
		b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"demo": server(demoArgs, true), "plain": server(`["-transport", "stdio"]`, false)}})
		return string(b)
	}
	dev := startDevIn(t, dir, doc(`["-transport", "stdio"]`), "api:\n  listen: "+apiAddr+"\nmcp_tasks:\n  enabled: true\n")
	plainServes := func(step string) {
		t.Helper()
		status, body := httpJSON(t, "POST", base+"/api/mcp/tools/plain_echo/call", `{"arguments":{"message":"hi"}}`)
		if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "text:hi") {
			t.Fatalf("%s: plain_echo: %d %v", step, status, body)
		}
		status, body = httpJSON(t, "GET", base+"/api/mcp/tools", "")
		if status != 200 || strings.Contains(fmt.Sprint(body), "mcpInterceptors") {
			t.Fatalf("%s: catalog: %d %v", step, status, body)
		}
	}
	plainServes("at start")

	status, body := httpJSON(t, "PATCH", base+"/api/mcp/config", `{"server_name": "demo", "enabled": false}`)
	if status != 200 {
		t.Fatalf("PATCH disabling demo: %d %v", status, body)
	}
	plainServes("after disabling demo")
	if status, body := httpJSON(t, "PATCH", base+"/api/mcp/config", `{"server_name": "demo", "enabled": true}`); status != 200 {
		t.Fatalf("PATCH enabling demo: %d %v", status, body)
	}
	testkit.Eventually(t, 60*time.Second, "demo's submit tool back", func() bool {
		_, body := httpJSON(t, "GET", base+"/api/mcp/tools", "")
		return strings.Contains(fmt.Sprint(toolNames(body)), "demo_submit_report")
	})

	var put map[string]any
	_ = json.Unmarshal([]byte(doc(`["-transport", "stdio", "-v"]`)), &put)
	sent, _ := json.Marshal(map[string]any{"mcp_servers": put["mcpServers"]})
	status, body = httpJSON(t, "PUT", base+"/api/mcp/config", string(sent))
	msg := fmt.Sprint(body["error"])
	if status != 409 || !strings.Contains(msg, "MCP server 'demo'") || !strings.Contains(msg, "args") || strings.Contains(msg, "mcpInterceptors") {
		t.Fatalf("PUT changing demo's args: %d %v", status, body)
	}
	plainServes("after the refused PUT")

	// A hand edit cannot be refused: only demo is held back, with the
	// reason on GET /api/mcp/servers.
	if err := os.WriteFile(filepath.Join(dir, "extensions_config.json"), []byte(doc(`["-transport", "stdio", "-v"]`)), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "demo held back with restart_required", func() bool {
		_, body := httpJSON(t, "GET", base+"/api/mcp/servers", "")
		for _, s := range asList(body["servers"]) {
			if s["name"] == "demo" && s["restart_required"] == true && strings.Contains(fmt.Sprint(s["last_error"]), "args") {
				return true
			}
		}
		return false
	})
	plainServes("after the hand edit")
	dev.stop(t)
}

func asList(v any) []map[string]any {
	items, _ := v.([]any)
	var out []map[string]any
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
