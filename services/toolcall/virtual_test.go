package toolcall_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics/metricstest"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// quotaClock is a settable clock shared by the replicas of a test.
type quotaClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *quotaClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *quotaClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestVirtualServerQuotas: over two toolcall replicas (one clock), a
// user's calls of a tool through a virtual server are counted together:
// two allowed, the third refused with rate_limited naming the quota and
// when to retry, other users and other tools unaffected, and the next
// window allows two again. A concurrent quota caps calls in flight per
// user and tool, and frees when one ends. Nothing refused reaches the
// upstream.
func TestVirtualServerQuotas(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	clk := &quotaClock{now: time.Unix(1_700_000_000, 0).Truncate(time.Minute).Add(10 * time.Second)}
	vs := config.VirtualSettings{Servers: []config.VirtualServer{{Name: "agent", Servers: []string{"web"},
		Tools:  []string{"web_echo", "web_whoami", "web_block"},
		Quotas: []config.Quota{{Tools: []string{"web_echo"}, Calls: 2, IntervalSeconds: 60}, {Tools: []string{"web_block"}, Concurrent: 1}}}}}
	regs := []*prometheus.Registry{metrics.NewRegistry(), metrics.NewRegistry()}
	o := options{cfg: cfgOf(map[string]string{"web": httpServerJSON(f.URL, "")}, ""), catalog: fakeTools("web"), virtual: vs, now: clk.Now,
		metrics: metrics.NewToolcall(regs[0])}
	e := startWith(t, o)
	o.metrics = metrics.NewToolcall(regs[1])
	e.addReplica(t, o)

	echo := func(user string) error {
		_, err := e.call(t, bus.Call{Tool: "web_echo", VirtualServer: "agent", UserID: user, Arguments: json.RawMessage(`{"message": "hi"}`)})
		return err
	}
	refused := func(err error, limit string) *bus.Error {
		t.Helper()
		var be *bus.Error
		if !errors.As(err, &be) || be.Code != bus.CodeRateLimited || !strings.Contains(be.Message, limit) {
			t.Fatalf("error %v; want rate_limited naming %s", err, limit)
		}
		return be
	}
	for i := range 2 {
		if err := echo("alice"); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	upstream := len(f.calls("tools/call"))
	be := refused(echo("alice"), "virtual_servers[agent].quotas[0]")
	if be.Details["retry_after_seconds"] != float64(50) {
		t.Errorf("retry_after_seconds = %v; want 50 (the window's end)", be.Details["retry_after_seconds"])
	}
	if n := len(f.calls("tools/call")); n != upstream {
		t.Errorf("the refused call reached the upstream (%d calls, was %d)", n, upstream)
	}
	if err := echo("bob"); err != nil {
		t.Errorf("bob refused because of alice: %v", err)
	}
	if _, err := e.call(t, bus.Call{Tool: "web_whoami", VirtualServer: "agent", UserID: "alice"}); err != nil {
		t.Errorf("a tool without the quota: %v", err)
	}
	clk.Add(50 * time.Second) // the next window
	if err := echo("alice"); err != nil {
		t.Errorf("the next window: %v", err)
	}

	// At most one block call of alice's in flight across the replicas:
	// while one runs, every replica refuses the next (each replica's
	// refusals are its own metrics), and the end of the call frees the
	// slot.
	refusals := func(i int) float64 {
		return metricstest.Value(t, regs[i], "mcpbus_toolcall_virtual_server_decisions_total", map[string]string{"virtual_server": "agent", "decision": "rate_limited"})
	}
	before := []float64{refusals(0), refusals(1)}
	fifo := newFifo(t)
	done := make(chan error, 1)
	go func() {
		_, err := e.call(t, bus.Call{Tool: "web_block", VirtualServer: "agent", UserID: "alice", Arguments: json.RawMessage(fmt.Sprintf(`{"fifo": %q}`, fifo))})
		done <- err
	}()
	testkit.Eventually(t, 30*time.Second, "the block call in flight upstream", func() bool {
		for _, c := range f.calls("tools/call") {
			if c.Tool == "block" {
				return true
			}
		}
		return false
	})
	testkit.Eventually(t, 30*time.Second, "both replicas to refuse a second block call", func() bool {
		_, err := e.call(t, bus.Call{Tool: "web_block", VirtualServer: "agent", UserID: "alice", Arguments: json.RawMessage(`{"fifo": "/nonexistent"}`)})
		be := refused(err, "virtual_servers[agent].quotas[1]")
		if be.Details["retry_after_seconds"] != float64(1) {
			t.Fatalf("retry_after_seconds = %v; want 1", be.Details["retry_after_seconds"])
		}
		return refusals(0) > before[0] && refusals(1) > before[1]
	})
	releaseFifo(t, fifo)
	if err := testkit.Receive(t, 30*time.Second, "the block call to end", done); err != nil {
		t.Fatal(err)
	}
	// The slot is free again, on any replica.
	for range 4 {
		_, err := e.call(t, bus.Call{Tool: "web_block", VirtualServer: "agent", UserID: "alice", Arguments: json.RawMessage(`{"fifo": "/nonexistent"}`)})
		if be := bus.AsError(err); be != nil && be.Code == bus.CodeRateLimited {
			t.Fatalf("after the call ended: %v; want the slot free", err)
		}
	}
}

// TestServerQuotas: a server's own quotas (mcpServers.<name>.quotas) hold
// over every caller across two replicas: web allows 2 calls a minute,
// whoever makes them (the third, by a third user, refused naming
// mcpServers.web.quotas[0] with the window's end, without reaching the
// upstream), and again in the next window; slow allows one call in
// flight: while alice's runs, every replica refuses bob's, the refusals
// counted as upstream_quota, and its end frees the slot. A server without
// quotas is not limited.
func TestServerQuotas(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	clk := &quotaClock{now: time.Unix(1_700_000_000, 0).Truncate(time.Minute).Add(10 * time.Second)}
	regs := []*prometheus.Registry{metrics.NewRegistry(), metrics.NewRegistry()}
	catalog := append(append(fakeTools("web"), fakeTools("slow")...), fakeTools("free")...)
	o := options{cfg: cfgOf(map[string]string{
		"web":  httpServerJSON(f.URL, `"quotas": [{"calls": 2, "interval_seconds": 60}]`),
		"slow": httpServerJSON(f.URL, `"quotas": [{"concurrent": 1}]`),
		"free": httpServerJSON(f.URL, ""),
	}, ""), catalog: catalog, now: clk.Now, metrics: metrics.NewToolcall(regs[0])}
	e := startWith(t, o)
	o.metrics = metrics.NewToolcall(regs[1])
	e.addReplica(t, o)
	refused := func(err error, limit string) *bus.Error {
		t.Helper()
		var be *bus.Error
		if !errors.As(err, &be) || be.Code != bus.CodeRateLimited || !strings.Contains(be.Message, limit) || be.Details["policy"] != limit {
			t.Fatalf("error %v; want rate_limited naming %s", err, limit)
		}
		return be
	}
	echo := func(server, user string) error {
		_, err := e.call(t, bus.Call{Tool: server + "_echo", UserID: user, Arguments: json.RawMessage(`{"message": "hi"}`)})
		return err
	}
	for _, user := range []string{"alice", "bob"} {
		if err := echo("web", user); err != nil {
			t.Fatalf("%s's call: %v", user, err)
		}
	}
	upstream := len(f.calls("tools/call"))
	be := refused(echo("web", "carol"), "mcpServers.web.quotas[0]")
	if be.Details["retry_after_seconds"] != float64(50) {
		t.Errorf("retry_after_seconds = %v; want 50 (the window's end)", be.Details["retry_after_seconds"])
	}
	if n := len(f.calls("tools/call")); n != upstream {
		t.Errorf("the refused call reached the upstream (%d calls, was %d)", n, upstream)
	}
	for range 3 {
		if err := echo("free", "carol"); err != nil {
			t.Errorf("a server without quotas: %v", err)
		}
	}
	clk.Add(50 * time.Second) // the next window
	if err := echo("web", "carol"); err != nil {
		t.Errorf("the next window: %v", err)
	}

	refusals := func(i int) float64 {
		return metricstest.Value(t, regs[i], "mcpbus_toolcall_rate_limited_total", map[string]string{"limit": "upstream_quota"})
	}
	before := []float64{refusals(0), refusals(1)}
	fifo := newFifo(t)
	done := make(chan error, 1)
	go func() {
		_, err := e.call(t, bus.Call{Tool: "slow_block", UserID: "alice", Arguments: json.RawMessage(fmt.Sprintf(`{"fifo": %q}`, fifo))})
		done <- err
	}()
	testkit.Eventually(t, 30*time.Second, "alice's block call in flight upstream", func() bool {
		for _, c := range f.calls("tools/call") {
			if c.Tool == "block" {
				return true
			}
		}
		return false
	})
	testkit.Eventually(t, 30*time.Second, "both replicas to refuse bob's block call", func() bool {
		_, err := e.call(t, bus.Call{Tool: "slow_block", UserID: "bob", Arguments: json.RawMessage(`{"fifo": "/nonexistent"}`)})
		refused(err, "mcpServers.slow.quotas[0]")
		return refusals(0) > before[0] && refusals(1) > before[1]
	})
	releaseFifo(t, fifo)
	if err := testkit.Receive(t, 30*time.Second, "alice's block call to end", done); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		_, err := e.call(t, bus.Call{Tool: "slow_block", UserID: "bob", Arguments: json.RawMessage(`{"fifo": "/nonexistent"}`)})
		if be := bus.AsError(err); be != nil && be.Code == bus.CodeRateLimited {
			t.Fatalf("after alice's call ended: %v; want the slot free", err)
		}
	}
}
