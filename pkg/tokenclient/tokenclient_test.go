package tokenclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/pkg/tokenclient"
)

// responder answers mcpbus.internal.token on the real bus, counting
// requests and holding them until release is closed (when set).
type responder struct {
	n       atomic.Int64
	release chan struct{}
	value   atomic.Value // string
	exp     time.Time
	skew    int
	fail    atomic.Bool
}

func startResponder(t *testing.T, nc *nats.Conn, names bus.Names, r *responder) {
	t.Helper()
	sub, err := nc.Subscribe(names.InternalToken(), func(m *nats.Msg) {
		go func() {
			r.n.Add(1)
			if r.release != nil {
				<-r.release
			}
			if r.fail.Load() {
				out := nats.NewMsg(m.Reply)
				out.Header.Set(bus.HeaderError, string(bus.CodeOAuthFailed))
				out.Data, _ = json.Marshal(bus.ErrorReply{Error: &bus.Error{Code: bus.CodeOAuthFailed, Message: "MCP server 's': refused"}})
				_ = m.RespondMsg(out)
				return
			}
			var req bus.TokenRequest
			_ = json.Unmarshal(m.Data, &req)
			b, _ := json.Marshal(bus.TokenReply{Header: "Authorization", Value: r.value.Load().(string), ExpiresAt: r.exp, RefreshSkewSeconds: r.skew})
			_ = m.Respond(b)
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	// The server must have the subscription before another connection asks.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestCachesUntilExpiryMinusSkewAndSharesOneRequest(t *testing.T) {
	b := testkit.StartBus(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r := &responder{release: make(chan struct{}), exp: now.Add(time.Hour), skew: 60}
	r.value.Store("Bearer one")
	startResponder(t, b.Connect(t), b.Names, r)
	c := tokenclient.New(b.Connect(t), b.Names, tokenclient.WithClock(clock))
	ctx := context.Background()
	req := bus.TokenRequest{Server: "s", ConfigFingerprint: "fp"}

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, v, _, err := c.Header(ctx, req)
			if err == nil && v != "Bearer one" {
				err = errors.New("value " + v)
			}
			errs <- err
		}()
	}
	testkit.Eventually(t, 5*time.Second, "the one request to arrive", func() bool { return r.n.Load() == 1 })
	close(r.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := r.n.Load(); n != 1 {
		t.Fatalf("%d requests for 20 concurrent callers, want 1", n)
	}
	// Cached until expiry minus skew.
	mu.Lock()
	now = now.Add(time.Hour - 61*time.Second)
	mu.Unlock()
	if _, _, _, err := c.Header(ctx, req); err != nil || r.n.Load() != 1 {
		t.Fatalf("inside the skew window: %v, %d requests", err, r.n.Load())
	}
	r.value.Store("Bearer two")
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	_, v, _, err := c.Header(ctx, req)
	if err != nil || v != "Bearer two" || r.n.Load() != 2 {
		t.Fatalf("after expiry minus skew: %q %v, %d requests", v, err, r.n.Load())
	}
	// ForceRefresh always asks.
	if _, _, _, err := c.Header(ctx, bus.TokenRequest{Server: "s", ConfigFingerprint: "fp", ForceRefresh: true}); err != nil || r.n.Load() != 3 {
		t.Fatalf("force: %v, %d requests", err, r.n.Load())
	}
	// Errors keep their code and are not cached.
	c.Forget("s", "")
	r.fail.Store(true)
	if _, _, _, err := c.Header(ctx, req); !errors.Is(err, &bus.Error{Code: bus.CodeOAuthFailed}) {
		t.Fatalf("error = %v, want oauth_failed", err)
	}
	r.fail.Store(false)
	if _, _, _, err := c.Header(ctx, req); err != nil {
		t.Fatal(err)
	}
}

func TestMergeHeaders(t *testing.T) {
	b := testkit.StartBus(t)
	r := &responder{exp: time.Now().Add(time.Hour)}
	r.value.Store("Bearer tok")
	startResponder(t, b.Connect(t), b.Names, r)
	c := tokenclient.New(b.Connect(t), b.Names)
	ctx := context.Background()

	static := map[string]string{"authorization": "Bearer static", "X-Other": "1"}
	plain := &config.Server{Name: "plain"}
	got, err := c.MergeHeaders(ctx, plain, "", static)
	if err != nil || len(got) != 2 || got["authorization"] != "Bearer static" || r.n.Load() != 0 {
		t.Fatalf("no oauth: %v %v, %d requests", got, err, r.n.Load())
	}
	got["X-Other"] = "changed"
	if static["X-Other"] != "1" {
		t.Fatal("MergeHeaders returned the caller's map")
	}
	srv := &config.Server{Name: "o", OAuth: &config.OAuth{Enabled: true}, Fingerprint: "f"}
	got, err = c.MergeHeaders(ctx, srv, "", static)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["authorization"] != "Bearer tok" || got["X-Other"] != "1" {
		t.Fatalf("merged = %v", got)
	}
	got, _ = c.MergeHeaders(ctx, srv, "", nil)
	if len(got) != 1 || got["Authorization"] != "Bearer tok" {
		t.Fatalf("merged without static = %v", got)
	}
	if r.n.Load() != 1 {
		t.Fatalf("%d requests, want 1 (cached)", r.n.Load())
	}
}

// TestHeaderWaitsForALateTokensService: no responder yet is "not up yet",
// not a failure: a caller with a deadline asks again until tokens answers;
// one without a deadline, or whose deadline passes, gets unavailable.
func TestHeaderWaitsForALateTokensService(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	nc := b.Connect(t)
	c := tokenclient.New(nc, b.Names)
	req := bus.TokenRequest{Server: "s", ConfigFingerprint: "fp"}

	if _, _, _, err := c.Header(context.Background(), req); !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("no deadline, no tokens service: err = %v, want unavailable at once", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, _, _, err := c.Header(short, req); !errors.Is(err, bus.ErrUnavailable) || !strings.Contains(err.Error(), "'s'") {
		t.Fatalf("deadline passed: err = %v, want unavailable naming the server", err)
	}

	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	sent := nc.Stats().OutMsgs
	got := make(chan error, 1)
	go func() {
		_, v, _, err := c.Header(ctx, req)
		if err == nil && v != "Bearer late" {
			err = errors.New("value " + v)
		}
		got <- err
	}()
	// Two asks went out and found nobody: the caller is waiting.
	testkit.Eventually(t, 10*time.Second, "the caller to ask twice", func() bool { return nc.Stats().OutMsgs >= sent+2 })
	r := &responder{exp: time.Now().Add(time.Hour)}
	r.value.Store("Bearer late")
	startResponder(t, b.Connect(t), b.Names, r)
	if err := testkit.Receive(t, 60*time.Second, "the waiting caller to get its token", got); err != nil {
		t.Fatalf("after tokens started: %v", err)
	}
}

// TestEachUserHasTheirOwnCachedToken: for a server whose accounts people
// connect, a user's cached token is never handed to another user.
func TestEachUserHasTheirOwnCachedToken(t *testing.T) {
	b := testkit.StartBus(t)
	nc := b.Connect(t)
	sub, err := nc.Subscribe(b.Names.InternalToken(), func(m *nats.Msg) {
		var req bus.TokenRequest
		_ = json.Unmarshal(m.Data, &req)
		out, _ := json.Marshal(bus.TokenReply{Header: "Authorization", Value: "Bearer token-of-" + req.UserID, ExpiresAt: time.Now().Add(time.Hour)})
		_ = m.Respond(out)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c := tokenclient.New(b.Connect(t), b.Names)
	for _, user := range []string{"alice", "bob", "alice"} {
		_, v, _, err := c.Header(context.Background(), bus.TokenRequest{Server: "gh", UserID: user, ConfigFingerprint: "fp"})
		if err != nil || v != "Bearer token-of-"+user {
			t.Fatalf("%s got %q, %v", user, v, err)
		}
	}
}
