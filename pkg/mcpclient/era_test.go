package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// eraHTTPServer serves the demo server limited to era over streamable
// HTTP (stateful, as demoserver -transport http is), counting the
// notifications/cancelled it receives in cancels.
func eraHTTPServer(t *testing.T, era string, cancels *demo.Cancellations) string {
	t.Helper()
	h, err := demo.NewHTTP(era, demo.Config{Cancellations: cancels}, server.WithStateful(true))
	if err != nil {
		t.Fatal(err)
	}
	return newStreamableServer(t, cancels.Watch(h)).URL + "/mcp"
}

// eraSpec is a spec for the demo server limited to era over transport: the
// demoserver binary over stdio, an HTTP server in this process otherwise.
func eraSpec(t *testing.T, transport, era string) mcpclient.Spec {
	t.Helper()
	name := "demo-" + transport + "-" + era
	if transport == mcpclient.TransportStdio {
		// A directory of its own makes the origin (and its cached era) the
		// test's alone.
		return mcpclient.Spec{Server: name, Command: demoBin, Args: []string{"-era", era}, InheritEnv: true, Dir: t.TempDir(), Eras: mcpclient.NewEraCache()}
	}
	return mcpclient.Spec{Server: name, Transport: transport, URL: eraHTTPServer(t, era, &demo.Cancellations{}), Eras: mcpclient.NewEraCache()}
}

// Every era of the demo server, over stdio and HTTP: the probe settles on
// 2026-07-28 only when server/discover lists it (a shim that answers
// discover without it, and a server refusing discover, get 2025-11-25),
// the era is cached per origin, and tools/list, a call, progress and
// cancellation work in each. Cancellation is notifications/cancelled on
// stdio and legacy HTTP, and the aborted POST alone on modern HTTP.
func TestEras(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{mcpclient.TransportStdio, mcpclient.TransportHTTP} {
		for era, want := range map[string]struct {
			era     mcpclient.Era
			version string
		}{
			demo.EraBoth:   {mcpclient.EraModern, mcpclient.ModernProtocolVersion},
			demo.EraModern: {mcpclient.EraModern, mcpclient.ModernProtocolVersion},
			demo.EraShim:   {mcpclient.EraLegacy, mcpclient.ProtocolVersion},
			demo.EraLegacy: {mcpclient.EraLegacy, mcpclient.ProtocolVersion},
		} {
			t.Run(transport+"/"+era, func(t *testing.T) {
				t.Parallel()
				spec := eraSpec(t, transport, era)
				if got := spec.Eras.Cached(spec); got != "" {
					t.Fatalf("CachedEra before connecting = %q", got)
				}
				c := connect(t, spec)
				info := c.ServerInfo()
				if info.Era != want.era || info.ProtocolVersion != want.version || info.Name != "demo" {
					t.Fatalf("ServerInfo = %+v, want era %s at %s", info, want.era, want.version)
				}
				if !info.ToolsListChanged {
					t.Errorf("ToolsListChanged = false")
				}
				if got := spec.Eras.Cached(spec); got != want.era {
					t.Errorf("CachedEra = %q, want %q", got, want.era)
				}
				checkEraCalls(t, c, transport == mcpclient.TransportStdio || want.era == mcpclient.EraLegacy)

				// A second connection of the origin takes the cached era.
				c2 := connect(t, spec)
				if got := c2.ServerInfo(); got.Era != want.era || got.ProtocolVersion != want.version {
					t.Errorf("second connection: ServerInfo = %+v", got)
				}
				if got := text(t, call(t, c2, "echo", `{"message":"again"}`, nil)); got != "again" {
					t.Errorf("echo on the second connection = %q", got)
				}
			})
		}
	}
}

// checkEraCalls lists the tools, calls echo, asks for progress and cancels
// a block call; notified says whether the server must have received
// notifications/cancelled for it.
func checkEraCalls(t *testing.T, c *mcpclient.Client, notified bool) {
	t.Helper()
	tools := toolNames(listTools(t, c))
	for _, name := range []string{"echo", "progress", "block", "cancellations"} {
		if !slices.Contains(tools, name) {
			t.Fatalf("tools/list lacks %q: %v", name, tools)
		}
	}
	if got := text(t, call(t, c, "echo", `{"message":"hi"}`, nil)); got != "hi" {
		t.Errorf("echo = %q", got)
	}

	checkDemoProgress(t, c)

	report := func() demo.CancellationReport {
		var r demo.CancellationReport
		if err := json.Unmarshal(call(t, c, "cancellations", "", nil).StructuredContent, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	bctx, bcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(bctx, "block", nil, nil)
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the block call to be in flight", func() bool { return report().InFlight > 0 })
	bcancel()
	if err := testkit.Receive(t, 60*time.Second, "the cancelled call to return", done); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the server to see the call cancelled", func() bool { return report().BlockedCancelled == 1 })
	if notified {
		// Sent off the caller's path: it may arrive after the abort.
		testkit.Eventually(t, 10*time.Second, "the server to receive notifications/cancelled", func() bool { return report().CancelNotifications == 1 })
	} else if r := report(); r.CancelNotifications != 0 {
		t.Errorf("notifications/cancelled received = %d, want none over modern HTTP", r.CancelNotifications)
	}
	// Still usable.
	if got := text(t, call(t, c, "echo", `{"message":"after"}`, nil)); got != "after" {
		t.Errorf("echo after the cancellation = %q", got)
	}
}

// A modern-only server refuses initialize, so forcing the legacy era
// fails; and a cached era that no longer fits (the server was replaced by
// a modern-only one) fails one Connect, after which the next probes again.
func TestEraModernOnlyAndStaleCache(t *testing.T) {
	t.Parallel()
	url := eraHTTPServer(t, demo.EraModern, &demo.Cancellations{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c, err := mcpclient.Connect(ctx, mcpclient.Spec{Server: "modern-only", Transport: mcpclient.TransportHTTP, URL: url, Era: mcpclient.EraLegacy}); err == nil {
		c.Close()
		t.Fatal("Connect with the legacy era to a modern-only server succeeded")
	} else {
		t.Log(err)
	}

	legacy, err := demo.New(demo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sw := &swapHandler{h: server.NewStreamableHTTPServer(legacy, server.WithStateful(true), server.WithStreamableHTTPProtocolVersions(mcpclient.ProtocolVersion))}
	spec := mcpclient.Spec{Server: "swapped", Transport: mcpclient.TransportHTTP, URL: newStreamableServer(t, sw).URL, Eras: mcpclient.NewEraCache()}
	if got := connect(t, spec).ServerInfo().Era; got != mcpclient.EraLegacy {
		t.Fatalf("era before the swap = %q", got)
	}

	opts, versions, err := demo.EraOptions(demo.EraModern)
	if err != nil {
		t.Fatal(err)
	}
	modern, err := demo.New(demo.Config{ServerOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	sw.set(server.NewStreamableHTTPServer(modern, server.WithStreamableHTTPProtocolVersions(versions...)))
	if c, err := mcpclient.Connect(ctx, spec); err == nil {
		c.Close()
		t.Fatal("Connect with the stale cached era succeeded")
	}
	if got := spec.Eras.Cached(spec); got != "" {
		t.Errorf("CachedEra after the failed Connect = %q, want it forgotten", got)
	}
	c := connect(t, spec)
	if got := c.ServerInfo().Era; got != mcpclient.EraModern {
		t.Errorf("era after the swap = %q", got)
	}
	if got := text(t, call(t, c, "echo", `{"message":"modern"}`, nil)); got != "modern" {
		t.Errorf("echo = %q", got)
	}

	// Reprobe ignores the cache (discovery's way to re-probe).
	sw.set(server.NewStreamableHTTPServer(legacy, server.WithStateful(true)))
	spec.Reprobe = true
	if got := connect(t, spec).ServerInfo().Era; got != mcpclient.EraModern {
		// The legacy server answers discover with every version: modern.
		t.Errorf("era with Reprobe = %q", got)
	}
}

// A stateless legacy server (no session id; it answers GET with 405)
// that refuses server/discover works: legacy era, calls and progress.
func TestEraStatelessLegacyServer(t *testing.T) {
	t.Parallel()
	opts, _, err := demo.EraOptions(demo.EraLegacy)
	if err != nil {
		t.Fatal(err)
	}
	s, err := demo.New(demo.Config{ServerOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		sessions []string
	)
	inner := server.NewStreamableHTTPServer(s, server.WithStateLess(true))
	ts := newStreamableServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
			return
		}
		mu.Lock()
		sessions = append(sessions, r.Header.Get("Mcp-Session-Id"))
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	c := connect(t, mcpclient.Spec{Server: "stateless", Transport: mcpclient.TransportHTTP, URL: ts.URL})
	if info := c.ServerInfo(); info.Era != mcpclient.EraLegacy || info.ProtocolVersion != mcpclient.ProtocolVersion {
		t.Fatalf("ServerInfo = %+v", info)
	}
	if got := text(t, call(t, c, "echo", `{"message":"x"}`, nil)); got != "x" {
		t.Errorf("echo = %q", got)
	}
	var steps atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CallTool(ctx, "progress", json.RawMessage(`{"steps":2}`), &mcpclient.CallOptions{Progress: func(json.RawMessage) { steps.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	if n := steps.Load(); n != 2 {
		t.Errorf("progress notifications = %d, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range sessions {
		if id != "" {
			t.Errorf("a request carried session id %q", id)
		}
	}
}

// A modern-only server that rejects the first server/discover with
// UnsupportedProtocolVersionError (-32022, HTTP 400) while listing
// 2026-07-28 in data.supported gets the discover once more, with a new
// request id, and the connection is modern; a -32022 that does not list
// it is not retried (the probe falls back to initialize, which a
// modern-only server refuses).
func TestEraProbeRetriesUnsupportedVersion(t *testing.T) {
	t.Parallel()
	inner, err := demo.NewHTTP(demo.EraModern, demo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reject := func(supported string) (string, *[]string) {
		var (
			mu       sync.Mutex
			rejected bool
			ids      []string
		)
		ts := newStreamableServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			_ = json.Unmarshal(body, &msg)
			mu.Lock()
			if msg.Method == "server/discover" {
				ids = append(ids, string(msg.ID))
			}
			first := !rejected && r.Method == http.MethodPost
			rejected = true
			mu.Unlock()
			if first {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":[`+supported+`],"requested":"2026-07-28"}}}`)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			inner.ServeHTTP(w, r)
		}))
		return ts.URL, &ids
	}

	url, ids := reject(`"2026-07-28"`)
	c := connect(t, mcpclient.Spec{Server: "rejects-once", Transport: mcpclient.TransportHTTP, URL: url})
	if info := c.ServerInfo(); info.Era != mcpclient.EraModern || info.ProtocolVersion != mcpclient.ModernProtocolVersion {
		t.Fatalf("ServerInfo = %+v, want the modern era", info)
	}
	if got := *ids; len(got) != 2 || got[0] == got[1] {
		t.Errorf("server/discover ids = %v, want two different ones", got)
	}
	if got := text(t, call(t, c, "echo", `{"message":"retried"}`, nil)); got != "retried" {
		t.Errorf("echo = %q", got)
	}

	url, ids = reject(`"2025-11-25"`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c, err := mcpclient.Connect(ctx, mcpclient.Spec{Server: "rejects-modern", Transport: mcpclient.TransportHTTP, URL: url}); err == nil {
		c.Close()
		t.Fatal("Connect succeeded although the server does not support 2026-07-28 and refuses initialize")
	}
	if got := *ids; len(got) != 1 {
		t.Errorf("server/discover sent %d times, want once (no retry without 2026-07-28 in data.supported)", len(got))
	}
}
