package bootstrap

import (
	"io"
	"net"
	"net/http"
	"os"
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
// without it, never serves the command line, and --pprof without
// --metrics-listen fails the start.
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
		gstatus, _ := get(t, "http://"+addr+"/debug/pprof/goroutine?debug=1")
		cstatus, cbody := get(t, "http://"+addr+"/debug/pprof/cmdline")
		stop()
		if cstatus != http.StatusNotFound || strings.Contains(cbody, os.Args[0]) {
			t.Errorf("pprof %v: /debug/pprof/cmdline answered %d %q, want 404 (the command line may hold a secret)", on, cstatus, cbody)
		}
		if on && gstatus != http.StatusOK {
			t.Errorf("pprof on: /debug/pprof/goroutine answered %d", gstatus)
		}
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
