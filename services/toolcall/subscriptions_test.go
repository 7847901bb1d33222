package toolcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// A subscription is audited when it is made and when it ends, not at each
// refresh: three subscribes of one subscriber (the stream holder's
// refreshes) and its unsubscribe are two records; a subscriber that is not
// sent again within the TTL (the clock moved past it) ends with a
// resources/unsubscribe record of outcome expired, naming its user and
// thread.
func TestSubscriptionsAuditedOnceNotPerRefresh(t *testing.T) {
	t.Parallel()
	h, err := demo.NewHTTP(demo.EraBoth, demo.Config{Federation: true}, server.WithStateful(true))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	var skew atomic.Int64 // seconds added to the service's clock
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load()) * time.Second) }
	settings := config.DefaultAudit()
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fed": httpServerJSON(hs.URL+"/mcp", "")}, ""), audit: &settings, now: now})
	uri := "mcpbus://fed/" + demo.GreetingURI
	subscribe := func(subject, subscriber string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := bus.Request[bus.ResourcesSubscribeReply](ctx, e.bus.NC, subject,
			bus.ResourcesSubscribeRequest{URI: uri, Subscriber: subscriber, UserID: "alice", ThreadID: "t1"}); err != nil {
			t.Fatalf("%s %s: %v", subject, subscriber, err)
		}
	}
	for range 3 {
		subscribe(e.bus.Names.ResourcesSubscribe(), "s1")
	}
	subscribe(e.bus.Names.ResourcesUnsubscribe(), "s1")
	recs := waitRecords(t, e.bus, 2)
	want := []string{"resources/subscribe " + demo.GreetingURI, "resources/unsubscribe " + demo.GreetingURI}
	if len(recs) != 2 || recs[0].Tool != want[0] || recs[1].Tool != want[1] {
		t.Fatalf("records = %+v, want %q then %q only", recs, want[0], want[1])
	}

	subscribe(e.bus.Names.ResourcesSubscribe(), "s2")
	skew.Store(bus.SubscriptionTTLSeconds + 5)
	// One consumer, read in order until the 4th call record: the
	// subscribe of s2, then its expiry.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := e.bus.JS.OrderedConsumer(ctx, e.bus.Names.AuditStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var calls []audit.Record
	for len(calls) < 4 {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("waiting for the expiry's record (%d call records so far: %+v): %v", len(calls), calls, err)
		}
		var rec audit.Record
		if json.Unmarshal(msg.Data(), &rec) == nil && rec.Kind == audit.KindCall {
			calls = append(calls, rec)
		}
	}
	if expired := calls[3]; expired.Tool != want[1] || expired.Outcome != "expired" || expired.User != "alice" || expired.Thread != "t1" || expired.Server != "fed" {
		t.Errorf("expiry record = %+v, want %q outcome expired for alice in t1 on fed", expired, want[1])
	}
}

// Subscriptions to a 2026-07-28-only server: subscribes of two URIs made
// at once end up in one upstream listen naming both (the connection's
// listen changes are serialized), and unsubscribes made at once end it.
func TestModernSubscriptionsShareOneListen(t *testing.T) {
	t.Parallel()
	h, err := demo.NewHTTP(demo.EraModern, demo.Config{Federation: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	e := start(t, cfgOf(map[string]string{"fed": httpServerJSON(hs.URL+"/mcp", "")}, ""), tools("fed", demo.ToolListenedResources))
	all := func(subject string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for i, raw := range []string{demo.GreetingURI, demo.BlobURI} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, err := bus.Request[bus.ResourcesSubscribeReply](ctx, e.bus.NC, subject,
					bus.ResourcesSubscribeRequest{URI: "mcpbus://fed/" + raw, Subscriber: fmt.Sprint("s", i), UserID: "alice", ThreadID: "t1"})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("%s: %v", subject, err)
			}
		}
	}
	listened := func() string {
		return text(t, e.mustCall(t, bus.Call{Tool: "fed_" + demo.ToolListenedResources}))
	}
	all(e.bus.Names.ResourcesSubscribe())
	if got, want := listened(), demo.BlobURI+","+demo.GreetingURI; got != want {
		t.Fatalf("the upstream listens to %q, want %q", got, want)
	}
	all(e.bus.Names.ResourcesUnsubscribe())
	testkit.Eventually(t, 20*time.Second, "the upstream listen to end", func() bool { return listened() == "" })
}
