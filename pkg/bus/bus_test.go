package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

type echoReq struct {
	Text string `json:"text"`
}

type echoResp struct {
	Text      string `json:"text"`
	RequestID string `json:"request_id"`
	Deadline  bool   `json:"deadline"`
}

func serve(t *testing.T, nc *nats.Conn, fn bus.HandlerFunc[echoReq, echoResp]) {
	t.Helper()
	svc, err := micro.AddService(nc, micro.Config{Name: "test", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	if err := svc.AddEndpoint("echo", bus.Handler(context.Background(), &wg, nil, fn), micro.WithEndpointSubject("test.echo")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(); wg.Wait() })
	// The subscription must reach the server before another connection asks.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestRequestRoundTripsRepliesAndErrors(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	serve(t, b.Connect(t), func(ctx context.Context, req echoReq) (echoResp, error) {
		_, hasDeadline := ctx.Deadline()
		switch req.Text {
		case "missing":
			return echoResp{}, bus.Errorf(bus.CodeNotFound, "no such thing: %s", req.Text)
		case "crash":
			return echoResp{}, errors.New("database password=hunter2 rejected")
		}
		return echoResp{Text: req.Text, RequestID: bus.RequestID(ctx), Deadline: hasDeadline}, nil
	})
	ctx, cancel := context.WithTimeout(bus.WithRequestID(context.Background(), "req-1"), 5*time.Second)
	defer cancel()

	got, err := bus.Request[echoResp](ctx, b.NC, "test.echo", echoReq{Text: "hi"})
	if err != nil || got.Text != "hi" || got.RequestID != "req-1" || !got.Deadline {
		t.Fatalf("reply = %+v, %v", got, err)
	}

	_, err = bus.Request[echoResp](ctx, b.NC, "test.echo", echoReq{Text: "missing"})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeNotFound || be.Message != "no such thing: missing" {
		t.Fatalf("error = %#v", err)
	}
	if !errors.Is(err, bus.ErrNotFound) || errors.Is(err, bus.ErrInternal) {
		t.Fatalf("errors.Is does not compare codes: %v", err)
	}

	// An error without a code crosses the bus as internal, without its text.
	_, err = bus.Request[echoResp](ctx, b.NC, "test.echo", echoReq{Text: "crash"})
	if !errors.Is(err, bus.ErrInternal) {
		t.Fatalf("error = %v, want internal", err)
	}
	if fmt.Sprint(err) != "internal: internal error" {
		t.Errorf("internal cause leaked over the bus: %q", err)
	}
}

func TestRequestWithoutResponderIsUnavailable(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	_, err := bus.Request[echoResp](context.Background(), b.NC, "nobody.home", echoReq{})
	if !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
}

func TestRequestDeadlineIsUpstreamTimeout(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	release := make(chan struct{})
	serve(t, b.Connect(t), func(ctx context.Context, req echoReq) (echoResp, error) {
		<-release
		return echoResp{}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := bus.Request[echoResp](ctx, b.NC, "test.echo", echoReq{})
	close(release)
	if !errors.Is(err, bus.ErrUpstreamTimeout) {
		t.Fatalf("err = %v, want upstream_timeout", err)
	}
}

// A request in flight when its connection to NATS drops (the server
// restarts) can no longer get its reply: it ends unavailable at once
// instead of waiting for its deadline (an hour here, so only the drop can
// end it before the test's own limit), and requests work again once the
// connection is back.
func TestRequestInFlightWhenTheConnectionDropsIsUnavailable(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	received := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	serve(t, b.Connect(t), func(ctx context.Context, req echoReq) (echoResp, error) {
		if req.Text == "hold" {
			received <- struct{}{}
			<-release
		}
		return echoResp{Text: req.Text}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := bus.Request[echoResp](ctx, b.NC, "test.echo", echoReq{Text: "hold"})
		done <- err
	}()
	testkit.Receive(t, 30*time.Second, "the held request to reach the responder", received)
	b.Restart(t)
	err := testkit.Receive(t, 60*time.Second, "the in-flight request to end after the drop", done)
	if !errors.Is(err, bus.ErrUnavailable) || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("err = %v, want unavailable (the connection dropped)", err)
	}
	testkit.Eventually(t, 30*time.Second, "requests to work again after the reconnect", func() bool {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		defer rcancel()
		r, err := bus.Request[echoResp](rctx, b.NC, "test.echo", echoReq{Text: "again"})
		return err == nil && r.Text == "again"
	})
}

// A request made while NATS is down waits for the reconnection, but only
// up to its deadline, and is never sent after its caller gave up: the
// responder (toolcall, and behind it the upstream) never sees the request
// that ended unavailable, though NATS comes back; a request made during
// the same outage whose deadline outlives it is answered after the
// restart.
func TestRequestThatGaveUpWhileNATSWasDownIsNeverDelivered(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	seen := make(chan string, 16)
	serve(t, b.Connect(t), func(ctx context.Context, req echoReq) (echoResp, error) {
		seen <- req.Text
		return echoResp{Text: req.Text}, nil
	})
	b.Stop()
	testkit.Eventually(t, 30*time.Second, "the requester to notice NATS is down", func() bool { return !b.NC.IsConnected() })

	// Gives up (its deadline passes) while NATS is still down.
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, gaveUp := bus.Request[echoResp](short, b.NC, "test.echo", echoReq{Text: "gave-up"})
	cancel()
	// Waits the outage out.
	long, cancelLong := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLong()
	done := make(chan error, 1)
	go func() {
		r, err := bus.Request[echoResp](long, b.NC, "test.echo", echoReq{Text: "waited"})
		if err == nil && r.Text != "waited" {
			err = fmt.Errorf("reply %q", r.Text)
		}
		done <- err
	}()
	b.Start(t)
	if err := testkit.Receive(t, 60*time.Second, "the request that waited out the restart", done); err != nil {
		t.Fatalf("request made during the outage with time to spare: %v, want its reply after the restart", err)
	}
	// A request the requester sends after both: on one connection
	// messages arrive in order, so anything left buffered from the outage
	// would reach the responder before it.
	if _, err := bus.Request[echoResp](long, b.NC, "test.echo", echoReq{Text: "marker"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for text := range seen {
		got = append(got, text)
		if text == "marker" {
			break
		}
	}
	if strings.Join(got, ",") != "waited,marker" {
		t.Fatalf("the responder received %q, want [waited marker]: a request was delivered after its caller gave up", got)
	}
	if !errors.Is(gaveUp, bus.ErrUnavailable) || !strings.Contains(gaveUp.Error(), "was not sent") {
		t.Fatalf("the request that gave up: %v, want unavailable naming that it was not sent", gaveUp)
	}
}

// After a NATS restart a requester may be back before its responder's
// connection (each reconnects on its own schedule): a request it sends
// then finds no responder although the service is only resubscribing.
// Nobody received it, so it is sent again until the responder is back
// (within a few seconds of the reconnection and the request's deadline)
// instead of failing unavailable.
func TestRequestRightAfterAReconnectWaitsForTheResponderToResubscribe(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	// The responder reconnects 3 s after the server is back; the
	// requester (bus.Connect) every 250 ms.
	slow, err := nats.Connect(b.URL, nats.MaxReconnects(-1), nats.ReconnectWait(3*time.Second), nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slow.Close)
	serve(t, slow, func(ctx context.Context, req echoReq) (echoResp, error) { return echoResp{Text: req.Text}, nil })
	b.Stop()
	testkit.Eventually(t, 30*time.Second, "both connections to notice NATS is down", func() bool {
		return !b.NC.IsConnected() && !slow.IsConnected()
	})
	b.Start(t)
	testkit.Eventually(t, 30*time.Second, "the requester to reconnect", b.NC.IsConnected)
	if slow.IsConnected() {
		t.Fatal("the responder reconnected as fast as the requester: the test shows nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := bus.Request[echoResp](ctx, b.NC, "test.echo", echoReq{Text: "after"})
	if err != nil || r.Text != "after" {
		t.Fatalf("request right after the reconnect: %+v %v, want the responder's reply once it resubscribed", r, err)
	}
}

func TestBadJSONIsInvalidRequest(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	serve(t, b.Connect(t), func(ctx context.Context, req echoReq) (echoResp, error) { return echoResp{}, nil })
	msg, err := b.NC.Request("test.echo", []byte("{not json"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(bus.HeaderError) != string(bus.CodeInvalidRequest) {
		t.Fatalf("header %s = %q", bus.HeaderError, msg.Header.Get(bus.HeaderError))
	}
}

func TestBumpGenerationIsMonotonicUnderContention(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	const n = 20
	var wg sync.WaitGroup
	seen := make(chan int64, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := bus.BumpGeneration(context.Background(), b.KV)
			if err != nil {
				t.Error(err)
				return
			}
			seen <- g
		}()
	}
	wg.Wait()
	close(seen)
	got := map[int64]bool{}
	for g := range seen {
		if got[g] {
			t.Errorf("generation %d handed out twice", g)
		}
		got[g] = true
	}
	gen, _, err := bus.ReadGeneration(context.Background(), b.KV)
	if err != nil || gen != n {
		t.Fatalf("generation = %d, %v; want %d", gen, err, n)
	}
}

func TestHTTPStatusOfEveryCode(t *testing.T) {
	t.Parallel()
	want := map[bus.Code]int{
		bus.CodeInvalidRequest: 400, bus.CodeUnauthorized: 401, bus.CodeForbidden: 403, bus.CodeGuardrailDenied: 403,
		bus.CodeNotFound: 404, bus.CodeToolDeferred: 409, bus.CodeCredentialsMissing: 422, bus.CodeCredentialsInvalid: 422,
		bus.CodeClientCapabilityMissing: 422,
		bus.CodeOAuthFailed:             502, bus.CodeUpstreamError: 502, bus.CodeConfigError: 503, bus.CodeUnavailable: 503,
		bus.CodeUpstreamTimeout: 504, bus.CodeInitTimeout: 504, bus.CodeInternal: 500,
	}
	for code, status := range want {
		if got := code.HTTPStatus(); got != status {
			t.Errorf("%s → %d, want %d", code, got, status)
		}
	}
}

// Handler serves every request on its own goroutine: n requests that each
// wait for all n to have started must all complete, first in a burst and
// again once the first burst's workers are idle and reused.
func TestHandlerServesRequestsConcurrently(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	const n = 16
	var (
		mu      sync.Mutex
		started int
		all     = make(chan struct{})
	)
	serve(t, b.Connect(t), func(ctx context.Context, req echoReq) (echoResp, error) {
		mu.Lock()
		started++
		if started%n == 0 {
			close(all)
			all = make(chan struct{})
		}
		wait := all
		if started%n == 0 {
			wait = nil
		}
		mu.Unlock()
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				return echoResp{}, ctx.Err()
			}
		}
		return echoResp{Text: req.Text}, nil
	})
	for round := range 2 {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				text := fmt.Sprintf("r%d-%d", round, i)
				got, err := bus.Request[echoResp](ctx, b.NC, "test.echo", echoReq{Text: text})
				if err == nil && got.Text != text {
					err = fmt.Errorf("got %q, want %q", got.Text, text)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// A reply or a request larger than the server's max_payload fails at once
// with an error that says so, instead of the requester waiting for its
// deadline.
func TestOversizedMessagesFailClearly(t *testing.T) {
	t.Parallel()
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, StoreDir: t.TempDir(), MaxPayload: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	connect := func() *nats.Conn {
		nc, err := nats.Connect(ns.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	serve(t, connect(), func(_ context.Context, req echoReq) (echoResp, error) {
		if req.Text == "big" {
			return echoResp{Text: strings.Repeat("x", 10000)}, nil
		}
		return echoResp{Text: req.Text}, nil
	})
	nc := connect()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A requester left waiting for its deadline would get upstream_timeout.
	_, err = bus.Request[echoResp](ctx, nc, "test.echo", echoReq{Text: "big"})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeInternal || !strings.Contains(be.Message, "max_payload") || !strings.Contains(be.Message, "bytes") {
		t.Fatalf("oversized reply: err = %v, want internal naming max_payload", err)
	}

	_, err = bus.Request[echoResp](ctx, nc, "test.echo", echoReq{Text: strings.Repeat("y", 5000)})
	if !errors.As(err, &be) || be.Code != bus.CodeInvalidRequest || !strings.Contains(be.Message, "max_payload 4096") {
		t.Fatalf("oversized request: err = %v, want invalid_request naming max_payload 4096", err)
	}

	// The service still answers.
	if got, err := bus.Request[echoResp](ctx, nc, "test.echo", echoReq{Text: "small"}); err != nil || got.Text != "small" {
		t.Fatalf("after: %+v, %v", got, err)
	}
}

// The presence bucket is opened as it is when it exists, even with
// settings JetStream would refuse to change (an older deployment's memory
// storage), and created otherwise.
func TestPresenceKVOpensWhatExists(t *testing.T) {
	t.Parallel()
	for _, existing := range []bool{false, true} {
		ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, StoreDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ns.Shutdown)
		nc, err := nats.Connect(ns.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if existing {
			if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bus.Names{}.PresenceBucket(), Storage: jetstream.MemoryStorage}); err != nil {
				t.Fatal(err)
			}
		}
		kv, err := bus.PresenceKV(ctx, js, bus.Names{}, 1)
		if err != nil {
			t.Fatalf("existing=%v: %v", existing, err)
		}
		if _, err := kv.PutString(ctx, "toolcall.x", "beat"); err != nil {
			t.Fatalf("existing=%v: put: %v", existing, err)
		}
		if _, err := bus.JetStreamSetup(ctx, js, bus.Names{}, 1); err != nil {
			t.Fatalf("existing=%v: setup after: %v", existing, err)
		}
	}
}

// The replica count reaches every bucket and stream: a single server cannot
// keep three copies, so asking for them fails (naming the bucket) instead
// of silently keeping one.
func TestJetStreamSetupAsksForTheReplicas(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bus.JetStreamSetup(ctx, b.JS, b.Names, 3); err == nil || !strings.Contains(err.Error(), b.Names.ConfigBucket()) {
		t.Fatalf("three replicas on one server: err = %v", err)
	}
	info, err := b.JS.Stream(ctx, b.Names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	if r := info.CachedInfo().Config.Replicas; r != 1 {
		t.Errorf("events stream replicas = %d, want 1", r)
	}
}

func TestRejectAuthTokenCoversEveryCarrier(t *testing.T) {
	t.Parallel()
	const secret = "tok-secret-1"
	meta := func(s string) json.RawMessage { return json.RawMessage(s) }
	for name, req := range map[string]bus.Call{
		"metadata.auth_token":                 {Metadata: meta(`{"auth_token":"` + secret + `"}`)},
		"metadata.config.metadata.auth_token": {Metadata: meta(`{"config":{"metadata":{"auth_token":"` + secret + `"}}}`)},
		"config.metadata.auth_token":          {Config: &bus.CallConfig{Metadata: meta(`{"auth_token":"` + secret + `"}`)}},
		"metadata not an object":              {Metadata: meta(`"` + secret + `"`)},
	} {
		err := req.RejectAuthToken()
		if !errors.Is(err, bus.ErrInvalidRequest) || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: err = %v, want invalid_request without the value", name, err)
		}
	}
	for name, req := range map[string]bus.Call{
		"none":           {},
		"null metadata":  {Metadata: meta(`null`), Config: &bus.CallConfig{Metadata: meta(`null`)}},
		"other metadata": {Metadata: meta(`{"trace":"x"}`), Config: &bus.CallConfig{Metadata: meta(`{"thread_id":"t"}`)}},
	} {
		if err := req.RejectAuthToken(); err != nil {
			t.Errorf("%s: err = %v, want nil", name, err)
		}
	}
}
