package bootstrap

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/observability"
)

// get returns the status and body of GET url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// freeAddr is a loopback address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The profiler is on the metrics listener with --pprof, absent (404)
// without it, and --pprof without --metrics-listen fails the start.
func TestServeMetricsPprof(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		rt := &Runtime{Log: observability.Discard(), Pprof: on}
		addr := freeAddr(t)
		stop, err := rt.ServeMetrics(addr)
		if err != nil {
			t.Fatal(err)
		}
		status, body := get(t, "http://"+addr+"/debug/pprof/")
		mstatus, _ := get(t, "http://"+addr+"/metrics")
		stop()
		switch {
		case mstatus != http.StatusOK:
			t.Errorf("pprof %v: /metrics answered %d", on, mstatus)
		case on && (status != http.StatusOK || !strings.Contains(body, "goroutine")):
			t.Errorf("pprof on: /debug/pprof/ answered %d %q, want the profile index", status, body)
		case !on && status != http.StatusNotFound:
			t.Errorf("pprof off: /debug/pprof/ answered %d, want 404", status)
		}
	}
	rt := &Runtime{Log: observability.Discard(), Pprof: true}
	if _, err := rt.ServeMetrics(""); err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Errorf("--pprof without --metrics-listen: %v, want an error naming --metrics-listen", err)
	}
}
