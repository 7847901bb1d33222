package audit_test

import (
	"context"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/audit/audittable"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics/metricstest"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// Close waits for the queued database writes: every record written before
// it is in mcp_audit when it returns, in order, config changes included.
func TestCloseFlushesTheDatabase(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	st := testkit.SQLiteStore(t)
	s := config.DefaultAudit()
	s.Database = true
	w, err := audit.NewWriter(context.Background(), b.Connect(t), b.Names, audit.WriterOptions{Settings: s, DB: audittable.Of(st)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300 // more than one batch
	for range n {
		w.Write(context.Background(), audit.Record{Kind: audit.KindCall, User: "u", Tool: "t", Outcome: "ok"})
	}
	w.Write(context.Background(), audit.Record{Kind: audit.KindConfig, User: "root", Action: "put_config",
		Changes: []audit.Change{{Server: "a", Op: "changed", Keys: []string{"env.K"}}}})
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, err := st.Audit().ListAuditRecords(t.Context(), store.ListAuditRecordsParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n+1 || rows[n].Kind != audit.KindConfig || string(rows[n].Changes) != `[{"server":"a","op":"changed","keys":["env.K"]}]` {
		t.Fatalf("%d rows after Close, want %d ending with the config change (last: %+v)", len(rows), n+1, rows[len(rows)-1])
	}
}

// A record the database refuses is counted as an audit failure (the
// stream still has it).
func TestDatabaseFailureIsCounted(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	st := testkit.SQLiteStore(t)
	reg := metrics.NewRegistry()
	s := config.DefaultAudit()
	s.Database = true
	w, err := audit.NewWriter(context.Background(), b.Connect(t), b.Names, audit.WriterOptions{Settings: s, DB: audittable.Of(st), Metrics: metrics.NewAudit(reg)})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close() // every insert fails from now on
	w.Write(context.Background(), audit.Record{Kind: audit.KindCall, User: "u", Tool: "t", Outcome: "ok"})
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f := metricstest.Value(t, reg, "mcpbus_audit_failures_total", map[string]string{"kind": audit.KindCall}); f != 1 {
		t.Errorf("failures{call} = %v, want 1", f)
	}
	if r := metricstest.Value(t, reg, "mcpbus_audit_records_total", map[string]string{"kind": audit.KindCall}); r != 1 {
		t.Errorf("records{call} (the stream) = %v, want 1", r)
	}
}
