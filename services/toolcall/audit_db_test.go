package toolcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/audit/audittable"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// With audit.database the call records also land in mcp_audit, on both SQL
// backends, with the same fields as the stream's; no column holds the
// server's header value, the call's context secret or a secret-named
// argument (the rows are grepped, arguments captured and masked); a row
// older than audit.max_age_hours is pruned when the writer starts.
func TestAuditRecordsReachTheDatabase(t *testing.T) {
	t.Parallel()
	testkit.SQLStores(t, func(t *testing.T, st store.Store) {
		const (
			headerSecret = "hdr-SEKRET-d41c"
			ctxSecret    = "ctx-SEKRET-e52d"
			keySecret    = "key-SEKRET-f63e"
		)
		db := st.Audit()
		old := store.AuditRecord{Time: time.Now().Add(-200 * time.Hour), Kind: "call", UserID: "old", Tool: "web_echo"}
		if err := db.InsertAuditRecords(t.Context(), store.InsertAuditRecordsParams{Records: []store.AuditRecord{old}}); err != nil {
			t.Fatal(err)
		}

		f := newHTTPFake(t, false)
		web := httpServerJSON(f.URL, fmt.Sprintf(`"headers": {"X-Api-Key": %q}, "headers_from_context": {"headers": {"X-Tenant": "tenant"}}`, headerSecret))
		settings := config.DefaultAudit()
		settings.Database, settings.CaptureArguments = true, true
		e := startWith(t, options{cfg: cfgOf(map[string]string{"web": web}, ""), catalog: fakeTools("web"), audit: &settings, auditDB: audittable.Table{Store: db}})

		ctx, cancel := context.WithTimeout(bus.WithRequestID(context.Background(), "req-db-1"), 30*time.Second)
		defer cancel()
		args := fmt.Sprintf(`{"message":"words %s %s","api_key":%q}`, ctxSecret, headerSecret, keySecret)
		if _, err := bus.Request[bus.ToolsCallReply](ctx, e.bus.NC, e.bus.Names.ToolsCall(), bus.Call{
			Tool: "web_echo", UserID: "alice", ThreadID: "t1", Arguments: json.RawMessage(args),
			Context: &bus.CallContext{Secrets: map[string]string{"tenant": ctxSecret}},
		}); err != nil {
			t.Fatal(err)
		}

		var rows []store.AuditRecord
		testkit.Eventually(t, 10*time.Second, "the call's row and the old row pruned", func() bool {
			var err error
			rows, err = db.ListAuditRecords(t.Context(), store.ListAuditRecordsParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			return len(rows) == 1 && rows[0].UserID == "alice"
		})
		r := rows[0]
		if r.Kind != "call" || r.Tool != "web_echo" || r.ServerName != "web" || r.Transport != "http" || r.ThreadID != "t1" ||
			r.Outcome != "ok" || r.RequestID != "req-db-1" || r.ResultBytes == 0 || r.DurationMS <= 0 || r.Time.IsZero() {
			t.Errorf("row = %+v", r)
		}
		var a map[string]string
		if err := json.Unmarshal(r.Arguments, &a); err != nil || a["api_key"] != "***" || a["message"] != "words *** ***" {
			t.Errorf("arguments = %s (%v)", r.Arguments, err)
		}
		dump := fmt.Sprintf("%+v %s %s", r, r.Arguments, r.Changes)
		for _, secret := range []string{headerSecret, ctxSecret, keySecret} {
			if strings.Contains(dump, secret) {
				t.Errorf("mcp_audit holds %q: %s", secret, dump)
			}
		}
	})
}
