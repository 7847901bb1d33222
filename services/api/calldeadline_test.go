package api_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// A call whose request no toolcall replica answers (it went, through a
// NATS route that has not noticed the partition yet, to a replica that is
// cut off) ends at the call's own deadline, timeout_ms, with a clean
// upstream_timeout naming the tool: not at the api's RequestTimeout (120 s
// here), which a caller with a 300 ms budget would see as a hung call.
func TestCallNobodyAnswersEndsAtItsDeadline(t *testing.T) {
	t.Parallel()
	blackHole := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(blackHole) }) })
	e := startWith(t, options{beforeCall: func() { <-blackHole }})
	status, body := e.do(t, "POST", "/api/mcp/tools/demo_echo/call", "", `{"arguments":{"message":"hi"},"timeout_ms":300}`)
	if status != http.StatusGatewayTimeout || errCode(body) != "upstream_timeout" {
		t.Fatalf("call that no replica answers: %d %v, want 504 upstream_timeout", status, body)
	}
	if msg := errMessage(body); !strings.Contains(msg, "demo_echo") || !strings.Contains(msg, "timeout_ms (300 ms)") {
		t.Errorf("message %q does not name the tool and its timeout_ms", msg)
	}
}
