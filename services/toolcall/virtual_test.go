package toolcall_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
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
	o := options{cfg: cfgOf(map[string]string{"web": httpServerJSON(f.URL, "")}, ""), catalog: fakeTools("web"), virtual: vs, now: clk.Now}
	e := startWith(t, o)
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

	// At most one block call of alice's in flight (per replica: this test
	// sends both to the replica that answers first, then checks the cap
	// on the one that holds the call).
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
	// Both replicas may take the next one; keep asking until the replica
	// holding the call answers (the other one's cap is its own).
	testkit.Eventually(t, 30*time.Second, "a second block call refused by the concurrent quota", func() bool {
		_, err := e.call(t, bus.Call{Tool: "web_block", VirtualServer: "agent", UserID: "alice", Arguments: json.RawMessage(`{"fifo": "/nonexistent"}`)})
		var be *bus.Error
		return errors.As(err, &be) && be.Code == bus.CodeRateLimited && strings.Contains(be.Message, "virtual_servers[agent].quotas[1]")
	})
	releaseFifo(t, fifo)
	if err := testkit.Receive(t, 30*time.Second, "the block call to end", done); err != nil {
		t.Fatal(err)
	}
}
