package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/audit/audittable"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// With audit.database a config change also lands in mcp_audit, on both SQL
// backends: who, the action and the changed keys, never a value (the rows
// are grepped for the old and new secrets of the file).
func TestConfigChangesReachTheDatabase(t *testing.T) {
	t.Parallel()
	testkit.SQLStores(t, func(t *testing.T, st store.Store) {
		const (
			oldSecret = "old-SEKRET-8d1a"
			newSecret = "new-SEKRET-9e2b"
			hdrSecret = "hdr-SEKRET-af3c"
		)
		doc := fmt.Sprintf(`{"mcpServers": {"a": {"command": "npx", "args": ["pkg"], "env": {"API_KEY": %q}}}}`, oldSecret)
		e := startWith(t, options{keys: testKeys(), configDoc: doc, audit: true, auditDB: audittable.Of(st)})
		put := fmt.Sprintf(`{"mcp_servers": {"a": {"command": "npx", "args": ["pkg"], "env": {"API_KEY": %q}},
				"web": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": %q}}}}`, newSecret, "Bearer "+hdrSecret)
		if status, body := e.do(t, "PUT", "/api/mcp/config", adminKey, put); status != 200 {
			t.Fatalf("put: %d %v", status, body)
		}
		var rows []store.AuditRecord
		testkit.Eventually(t, 10*time.Second, "the config change's row", func() bool {
			var err error
			rows, err = st.Audit().ListAuditRecords(t.Context(), store.ListAuditRecordsParams{Kind: "config", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			return len(rows) >= 1
		})
		r := rows[0]
		var changes []map[string]any
		if err := json.Unmarshal(r.Changes, &changes); err != nil {
			t.Fatalf("changes %s: %v", r.Changes, err)
		}
		if r.UserID != "root" || r.Action != "put_config" || len(changes) != 2 ||
			!strings.Contains(string(r.Changes), `"env.API_KEY"`) || !strings.Contains(string(r.Changes), `"added"`) {
			t.Errorf("row = %+v, changes %s", r, r.Changes)
		}
		dump := fmt.Sprintf("%+v %s %s", r, r.Arguments, r.Changes)
		for _, s := range []string{oldSecret, newSecret, hdrSecret, "example.com"} {
			if strings.Contains(dump, s) {
				t.Errorf("mcp_audit holds %q: %s", s, dump)
			}
		}
	})
}
