package toolcall_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// BenchmarkAuditOverhead runs the same HTTP tool call through two toolcall
// services, one writing an audit record per call to JetStream and one
// without, with 32 concurrent callers, in interleaved rounds of one run;
// the metric that matters is audit/plain-calls/s.
func BenchmarkAuditOverhead(b *testing.B) {
	f := newHTTPFake(b, false)
	cfg := cfgOf(map[string]string{"bench": httpServerJSON(f.URL, "")}, "")
	settings := config.DefaultAudit()
	plain := startWith(b, options{cfg: cfg, catalog: tools("bench", "echo"), quiet: true})
	audited := startWith(b, options{cfg: cfg, catalog: tools("bench", "echo"), quiet: true, audit: &settings})
	const callers = 32
	args := json.RawMessage(`{"message":"ping"}`)
	run := func(e *env, n int) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for c := range callers {
			wg.Go(func() {
				for i := c; i < n; i += callers {
					if _, err := bus.Request[bus.ToolsCallReply](b.Context(), e.bus.NC, e.bus.Names.ToolsCall(), bus.Call{Tool: "bench_echo", Arguments: args}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	run(plain, callers)
	run(audited, callers)
	b.ResetTimer()
	var tPlain, tAudit time.Duration
	const rounds = 5
	for range rounds {
		tPlain += run(plain, b.N)
		tAudit += run(audited, b.N)
	}
	calls := float64(rounds * b.N)
	b.ReportMetric(calls/tPlain.Seconds(), "plain-calls/s")
	b.ReportMetric(calls/tAudit.Seconds(), "audit-calls/s")
	b.ReportMetric(tPlain.Seconds()/tAudit.Seconds(), "audit/plain-calls/s")
}
