package toolcall_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics/metricstest"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// The flood attack: one user keeps slow calls in flight. Past the per-user
// cap the next call is refused at once with rate_limited naming the limit,
// another user is unaffected, the upstream's own cap holds for all users
// together, refusals are counted, and the cap frees when a call ends. The
// calls in flight are a gauge (the autoscaling signal).
func TestCallsInFlightAreCapped(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	reg := metrics.NewRegistry()
	e := startWith(t, options{cfg: cfgOf(map[string]string{"web": httpServerJSON(f.URL, "")}, ""), catalog: fakeTools("web"),
		metrics:  metrics.NewToolcall(reg),
		upstream: config.Upstream{Limits: config.Limits{MaxCallsInFlightPerUser: 2, MaxCallsInFlightPerServer: 3}}})

	type done struct {
		user string
		err  error
	}
	finished := make(chan done, 3)
	block := func(user string) string {
		fifo := newFifo(t)
		go func() {
			_, err := e.call(t, bus.Call{Tool: "web_block", UserID: user, Arguments: json.RawMessage(fmt.Sprintf(`{"fifo": %q}`, fifo))})
			finished <- done{user, err}
		}()
		return fifo
	}
	upstreamHas := func(n int) {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%d calls to be in flight upstream", n), func() bool { return len(f.calls("tools/call")) >= n })
	}
	echo := func(user string) error {
		_, err := e.call(t, bus.Call{Tool: "web_echo", UserID: user, Arguments: json.RawMessage(`{"message": "hi"}`)})
		return err
	}
	refused := func(err error, setting string, max int) {
		t.Helper()
		var be *bus.Error
		if !errors.As(err, &be) || be.Code != bus.CodeRateLimited || !strings.Contains(be.Message, setting) || !strings.Contains(be.Message, fmt.Sprint(max)) {
			t.Fatalf("error %v, want rate_limited naming %s (%d)", err, setting, max)
		}
	}

	inFlight := func() float64 { return metricstest.Value(t, reg, "mcpbus_toolcall_calls_in_flight", nil) }
	first := block("alice")
	second := block("alice")
	upstreamHas(2)
	if n := inFlight(); n != 2 {
		t.Errorf("calls_in_flight = %v with two calls blocked upstream, want 2", n)
	}
	refused(echo("alice"), "limits.max_calls_in_flight_per_user", 2)
	if err := echo("bob"); err != nil {
		t.Fatalf("bob was refused because of alice: %v", err)
	}
	third := block("bob")
	upstreamHas(4) // alice's two blocks, bob's echo and bob's block
	refused(echo("carol"), "limits.max_calls_in_flight_per_server", 3)
	if n := metricstest.Value(t, reg, "mcpbus_toolcall_rate_limited_total", map[string]string{"limit": "user"}); n != 1 {
		t.Errorf("rate_limited_total{limit=user} = %v, want 1", n)
	}
	if n := metricstest.Value(t, reg, "mcpbus_toolcall_rate_limited_total", map[string]string{"limit": "server"}); n != 1 {
		t.Errorf("rate_limited_total{limit=server} = %v, want 1", n)
	}

	releaseFifo(t, first)
	if d := <-finished; d.user != "alice" || d.err != nil {
		t.Fatalf("the released call: %+v", d)
	}
	if err := echo("alice"); err != nil {
		t.Fatalf("alice's call after one of hers ended: %v", err)
	}
	releaseFifo(t, second)
	releaseFifo(t, third)
	for range 2 {
		if d := <-finished; d.err != nil {
			t.Fatalf("a released call: %+v", d)
		}
	}
	// The gauge falls as each call's reply is sent, just after the caller
	// has it.
	testkit.Eventually(t, 30*time.Second, "calls_in_flight to return to 0", func() bool { return inFlight() == 0 })
}
