package healthhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/healthhttp"
)

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode, body
}

// TestReadinessFollowsChecks: /healthz is 200 whatever the checks say;
// /readyz is 503 naming the failing check (not its error text) and 200
// once every check passes.
func TestReadinessFollowsChecks(t *testing.T) {
	var natsUp atomic.Bool
	srv, err := healthhttp.Start("127.0.0.1:0", healthhttp.Checks{
		"nats": func(context.Context) error {
			if !natsUp.Load() {
				return errors.New("dial nats://user:secret@10.0.0.1:4222 refused")
			}
			return nil
		},
		"database": func(context.Context) error { return nil },
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	base := "http://" + srv.Addr()

	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200", code)
	}
	code, body := get(t, base+"/readyz")
	checks, _ := body["checks"].(map[string]any)
	if code != http.StatusServiceUnavailable || body["status"] != "not_ready" || checks["nats"] != "unavailable" || checks["database"] != "ok" {
		t.Errorf("/readyz with NATS down: %d %v", code, body)
	}
	raw, _ := json.Marshal(body)
	if s := string(raw); strings.Contains(s, "secret") || strings.Contains(s, "10.0.0.1") {
		t.Errorf("/readyz leaks the check's error: %s", s)
	}

	natsUp.Store(true)
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || body["status"] != "ready" {
		t.Errorf("/readyz with every check passing: %d %v", code, body)
	}
	resp, err := http.Post(base+"/readyz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz: %d, want 405", resp.StatusCode)
	}
}

// TestCloseStopsListening: after Close the port refuses connections.
func TestCloseStopsListening(t *testing.T) {
	srv, err := healthhttp.Start("127.0.0.1:0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("/healthz answered %d after Close", resp.StatusCode)
	}
}
