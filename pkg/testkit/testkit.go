// Package testkit holds what mcpbus tests share: an embedded NATS server
// with JetStream per test, a cluster of nats-server processes
// (StartNATSCluster), the KV bucket and events stream set up on it,
// publishing an extensions config the way the api service does, a
// PostgreSQL schema per test (PostgresSchema, PostgresStore) and a
// migrated SQLite file (SQLiteStore), a logger through t.Log (Logger),
// building the demo MCP server binary once per test process, and waiting
// on a condition or a channel with a generous deadline that fails with a
// message (Eventually, Receive) instead of sleeping or hanging.
package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
)

// Bus is an embedded NATS server with the mcpbus JetStream setup in a
// fresh random namespace (Names), so a test that forgets to hand Names to a
// service fails instead of passing on the default names.
type Bus struct {
	URL string
	// Names are the test deployment's subjects, buckets and stream.
	Names bus.Names
	NC    *nats.Conn
	JS    jetstream.JetStream
	KV    jetstream.KeyValue
	// Presence is the replicas' presence bucket (bus.PresenceKV).
	Presence jetstream.KeyValue

	server     *bus.Embedded
	store      string
	maxPayload int32
}

// StartBus starts an embedded NATS server on a free port for this test.
func StartBus(t testing.TB) *Bus {
	t.Helper()
	return StartBusMaxPayload(t, 0)
}

// StartBusMaxPayload is StartBus with the server's max_payload (0: the
// embedded default), for tests of what does not fit in one message.
func StartBusMaxPayload(t testing.TB, maxPayload int32) *Bus {
	t.Helper()
	store := t.TempDir()
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, StoreDir: store, MaxPayload: maxPayload})
	if err != nil {
		t.Fatalf("start embedded nats: %v", err)
	}
	t.Cleanup(ns.Shutdown)
	b := &Bus{URL: ns.URL(), Names: RandomNames(t), server: ns, store: store, maxPayload: maxPayload}
	b.NC = b.Connect(t)
	js, err := jetstream.New(b.NC)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := bus.JetStreamSetup(ctx, js, b.Names, 1)
	if err != nil {
		t.Fatalf("jetstream setup: %v", err)
	}
	presence, err := bus.PresenceKV(ctx, js, b.Names, 1)
	if err != nil {
		t.Fatalf("presence bucket: %v", err)
	}
	b.JS, b.KV, b.Presence = js, kv, presence
	return b
}

// RandomNames returns the names of a fresh random namespace ("t" and 12
// hex digits), for a test deployment on a NATS server that others share.
func RandomNames(t testing.TB) bus.Names {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	ns := "t" + hex.EncodeToString(b[:])
	n, err := bus.NewNames(ns)
	if err != nil {
		t.Fatal(err)
	}
	removeNamespaceOnSharedNATS(t, ns)
	return n
}

// Connect opens another connection to the bus (a "process" of its own),
// with the services' reconnect options.
func (b *Bus) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := bus.Connect(b.URL, t.Name(), bus.Auth{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Restart stops the NATS server and starts it again on the same port and
// JetStream store, as an operator restarting it would; connections
// reconnect on their own.
func (b *Bus) Restart(t testing.TB) {
	t.Helper()
	b.Stop()
	b.Start(t)
}

// Stop stops the NATS server (its JetStream has no leader until Start);
// connections keep trying to reconnect.
func (b *Bus) Stop() { b.server.Shutdown() }

// Start starts the stopped NATS server again on the same port and
// JetStream store.
func (b *Bus) Start(t testing.TB) {
	t.Helper()
	u, err := url.Parse(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: port, StoreDir: b.store, MaxPayload: b.maxPayload})
	if err != nil {
		t.Fatalf("restart embedded nats: %v", err)
	}
	t.Cleanup(ns.Shutdown)
	b.server = ns
}

// PublishExtensions writes raw as the shared config (as the api service
// does for its file) and returns it parsed.
func (b *Bus) PublishExtensions(t testing.TB, raw string) *config.Extensions {
	t.Helper()
	path := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	rec, err := sharedstate.ReadFileRecord(path)
	if err != nil {
		t.Fatalf("config record: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sharedstate.PublishConfig(ctx, b.KV, rec); err != nil {
		t.Fatalf("publish config: %v", err)
	}
	ext, err := rec.Parse()
	if err != nil {
		t.Fatal(err)
	}
	return ext
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// DemoServer builds examples/demoserver once per test process and returns
// the binary's path.
func DemoServer(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpbus-demo-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "demo-server")
		out, err := exec.Command("go", "build", "-o", buildPath, "github.com/mcpbus/mcpbus/examples/demoserver").CombinedOutput()
		if err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	if buildErr != nil {
		t.Fatalf("build demo server: %v", buildErr)
	}
	return buildPath
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// Eventually polls cond until it returns true or the timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// Receive waits for a value on ch and returns it, failing the test with
// what when none comes within timeout. The timeout is a hang detector, not
// a speed check: make it generous (tens of seconds), so a loaded machine
// never trips it and a hang fails with a message instead of running into
// the suite's timeout.
func Receive[T any](t testing.TB, timeout time.Duration, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		var zero T
		return zero
	}
}
