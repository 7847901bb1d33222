package bootstrap_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// fakeService is a service that reports ready when told to and, once its
// ctx is cancelled, stays in Run until released (an in-flight drain).
type fakeService struct {
	ready    atomic.Bool
	draining chan struct{}
	release  chan struct{}
}

func (f *fakeService) Ready() bool { return f.ready.Load() }

func (f *fakeService) Run(ctx context.Context) error {
	<-ctx.Done()
	close(f.draining)
	<-f.release
	return ctx.Err()
}

func status(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeHealthListener: `serve --health-listen` answers /healthz, and
// /readyz only once NATS is connected and the service says it serves;
// readiness goes false as soon as shutdown starts, while the service still
// drains, and the listener closes when Serve returns.
func TestServeHealthListener(t *testing.T) {
	b := testkit.StartBus(t)
	dir := t.TempDir()
	conf := fmt.Sprintf("nats:\n  url: %s\n  namespace: %s\ndatabase:\n  backend: sqlite\n  path: %s\nlog:\n  level: warn\n",
		b.URL, b.Names.Namespace(), filepath.Join(dir, "db"))
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "extensions_config.json"), []byte(`{"mcpServers":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	svc := &fakeService{draining: make(chan struct{}), release: make(chan struct{})}
	rt, err := bootstrap.Load(bootstrap.Options{
		ConfigPath: filepath.Join(dir, "config.yaml"), ExtensionsPath: filepath.Join(dir, "extensions_config.json"),
		HealthListen: "127.0.0.1:0", // the port is read back from the listener: no race for a free port
	}, config.Env{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var pings atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	addrs := make(chan string, 1)
	go func() {
		done <- bootstrap.Serve(ctx, rt, "fake", func(ctx context.Context, _ *bootstrap.Runtime, h *bootstrap.Health) error {
			h.SetDatabase(func(context.Context) error { pings.Add(1); return nil })
			addrs <- h.Addr()
			return h.Run(ctx, svc)
		})
	}()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("Serve returned before running the service: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("Serve did not run the service within 60s")
	}
	base := "http://" + addr
	testkit.Eventually(t, 30*time.Second, "/healthz to answer 200", func() bool { return status(base+"/healthz") == http.StatusOK })
	if got := status(base + "/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the service serves: %d, want 503", got)
	}
	svc.ready.Store(true)
	testkit.Eventually(t, 30*time.Second, "/readyz to answer 200", func() bool { return status(base+"/readyz") == http.StatusOK })
	if pings.Load() == 0 {
		t.Error("readiness did not ping the database")
	}

	cancel()
	<-svc.draining
	testkit.Eventually(t, 30*time.Second, "/readyz to answer 503 while draining", func() bool {
		return status(base+"/readyz") == http.StatusServiceUnavailable
	})
	if got := status(base + "/healthz"); got != http.StatusOK {
		t.Errorf("/healthz while draining: %d, want 200", got)
	}
	close(svc.release)
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve: %v", err)
	}
	if got := status(base + "/healthz"); got != 0 {
		t.Errorf("/healthz after Serve returned: %d, want no listener", got)
	}
}
