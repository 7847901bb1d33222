package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestShutdownDrainsInFlightRequestsAndRefusesNewOnes: once the api is told
// to stop, /readyz says 503 and a new request gets 503 unavailable at once,
// while the call already in flight still completes with 200; only then
// does Run return.
func TestShutdownDrainsInFlightRequestsAndRefusesNewOnes(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e := startWith(t, options{beforeCall: func() {
		once.Do(func() { close(entered) })
		<-release
	}})
	type result struct {
		status int
		body   string
		err    error
	}
	call := func() result {
		resp, err := http.Post(e.base+"/api/mcp/tools/demo_echo/call", "application/json", strings.NewReader(`{"arguments":{}}`))
		if err != nil {
			return result{err: err}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, body: string(b)}
	}
	inflight := make(chan result, 1)
	go func() { inflight <- call() }()
	<-entered

	stopped := make(chan struct{})
	go func() { e.stop(); close(stopped) }()
	testkit.Eventually(t, 10*time.Second, "readiness to go false", func() bool {
		resp, err := http.Get(e.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	refused := call()
	if refused.err != nil || refused.status != http.StatusServiceUnavailable {
		t.Fatalf("a new call while draining: %d %q %v, want 503", refused.status, refused.body, refused.err)
	}
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(refused.body), &body); err != nil || body.Error.Code != "unavailable" {
		t.Fatalf("refusal body %q: want error code unavailable", refused.body)
	}
	select {
	case <-stopped:
		t.Fatal("Run returned while a call was in flight")
	default:
	}
	close(release)
	if r := <-inflight; r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, "default") {
		t.Fatalf("the in-flight call: %d %q %v, want 200", r.status, r.body, r.err)
	}
	<-stopped
}
