package main_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// With audit.database (as startStack configures it, on SQLite) the wired
// services write a REST tool call's record (toolcall) and a cache reset's
// (api) to mcp_audit.
func TestAuditDatabaseInAStack(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	s := startStack(t, b.URL, testkit.RandomNames(t), fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "stdio", "command": %q}}}`, demoBin))
	testkit.Eventually(t, 60*time.Second, "alpha's tools", func() bool { return slices.Contains(s.tools(t), "alpha_echo") })
	if status, body := httpJSON(t, "POST", s.api+"/api/mcp/tools/alpha_echo/call", `{"arguments":{"message":"audited"}}`); status != 200 {
		t.Fatalf("call: %d %v", status, body)
	}
	if status, body := httpJSON(t, "POST", s.api+"/api/mcp/cache/reset", `{}`); status != 200 {
		t.Fatalf("reset: %d %v", status, body)
	}
	testkit.Eventually(t, 30*time.Second, "the call's and the reset's rows", func() bool {
		rows, err := s.db.Audit().ListAuditRecords(t.Context(), store.ListAuditRecordsParams{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var call, reset bool
		for _, r := range rows {
			call = call || (r.Kind == "call" && r.Tool == "alpha_echo" && r.ServerName == "alpha" && r.Outcome == "ok")
			reset = reset || (r.Kind == "config" && r.Action == "cache_reset")
		}
		return call && reset
	})
}
