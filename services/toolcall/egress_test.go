package toolcall_test

import (
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// A user's personal http connection pointed at a loopback service is
// refused by the egress policy at call time too, before any request.
func TestPersonalCallSSRFRefused(t *testing.T) {
	t.Parallel()
	a := newFakeAPI()
	e := startWith(t, options{cfg: emptyConfig, userTools: a.tools}) // no egress allowlist
	a.attach(t, e.bus)
	f := newHTTPFake(t, false)
	web := a.put(t, "mallory", "web", httpServerJSON(f.URL, `"headers": {"Metadata-Flavor": "Google"}`))
	_, err := e.call(t, bus.Call{Tool: web + "_echo", Arguments: json.RawMessage(`{"message":"x"}`), UserID: "mallory", ThreadID: "t1"})
	if err == nil || !strings.Contains(err.Error(), "refused by the egress policy") {
		t.Fatalf("call = %v, want refused by the egress policy", err)
	}
	if n := len(f.all()); n != 0 {
		t.Fatalf("the loopback service got %d request(s)", n)
	}
}

// A deployment tool that answers 300 MB fails naming the server and the
// limit, and toolcall's memory stays flat: reading stops at the limit.
func TestHugeToolResultIsCutAtTheLimit(t *testing.T) {
	huge := testkit.HugeMCPServer(t, 300<<20, false)
	e := start(t, cfgOf(map[string]string{"huge": httpServerJSON(huge.URL, "")}, ""), tools("huge", "big"))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := e.call(t, bus.Call{Tool: "huge_big", UserID: "alice", ThreadID: "t1"})
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a 300 MB answer succeeded")
	}
	limit := strconv.Itoa(mcpclient.DefaultMaxResponseBytes)
	if msg := err.Error(); !strings.Contains(msg, "huge") || !strings.Contains(msg, limit) || len(msg) > 2048 {
		t.Fatalf("error %q: want the server and the limit %s named, and no response in it", msg, limit)
	}
	const bound = 200 << 20
	if d := after.TotalAlloc - before.TotalAlloc; d > bound {
		t.Fatalf("the call allocated %d MB, want under %d MB", d>>20, bound>>20)
	}
}
