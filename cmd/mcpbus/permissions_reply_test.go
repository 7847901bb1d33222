package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestNATSReplySubjectsCannotBeForged attacks a deployment on a
// nats-server configured with deploy/nats/accounts.conf as alice's agent
// worker, which publishes on her own subjects with reply subjects of
// somebody else: bob's tools.call subject (the answer would run as a call
// by bob), the config bucket's generation and config keys (the catalog
// would overwrite them) and the catalog events subject (a forged event).
// Each request is dropped unanswered, counted and audited; nothing
// reaches those subjects, the keys keep their revision and bob has no
// call. Her request with her own inbox is still answered.
func TestNATSReplySubjectsCannotBeForged(t *testing.T) {
	p := startPermNATS(t, nil)
	pw, addr := p.pw, p.addr
	servicesURL := p.url("test-observer")
	ext := fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": %q}}}`, demoBin)
	names := bus.Names{}.WithUserSubjects(true)
	st := p.startStack(t, names, ext)

	alice := testkit.ConnectNATSUser(t, "nats://"+addr, "agent-alice", pw["AGENT_ALICE"], "_INBOX_alice")
	aliceCall := names.User("alice", bus.VerbToolsCall)
	testkit.Eventually(t, 60*time.Second, "alice's own call to be answered", func() bool {
		r, err := request[bus.ToolsCallReply](alice.NC, aliceCall, bus.Call{Tool: "demo_echo", Arguments: []byte(`{"message":"mine"}`)})
		return err == nil && !r.IsError
	})

	// The services' view: whatever lands on the forged subjects.
	observer, err := bus.Connect(servicesURL, "reply-observer", bus.Auth{}, observability.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(observer.Close)
	var mu sync.Mutex
	var landed []string
	for _, subject := range []string{names.UserPrefix("bob") + ">", names.EventsAll()} {
		if _, err := observer.Subscribe(subject, func(m *nats.Msg) {
			mu.Lock()
			landed = append(landed, m.Subject)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := observer.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := st.js.KeyValue(ctx, names.ConfigBucket())
	if err != nil {
		t.Fatal(err)
	}
	revision := func(key string) uint64 { // 0: no such key
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0
		}
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return e.Revision()
	}
	genRev, cfgRev := revision(bus.KVKeyGen), revision(bus.KVKeyConfig)

	call, _ := json.Marshal(bus.Call{Tool: "demo_echo", Arguments: []byte(`{"message":"as bob?"}`)})
	kvPrefix := "$KV." + names.ConfigBucket() + "."
	attacks := []struct {
		subject, reply, service string
		body                    []byte
	}{
		{aliceCall, names.User("bob", bus.VerbToolsCall), bus.ServiceToolcall, call},
		{aliceCall, "_INBOX_bob.stolen", bus.ServiceToolcall, call},
		{names.User("alice", bus.VerbToolsList), kvPrefix + bus.KVKeyGen, bus.ServiceDiscovery, []byte(`{}`)},
		{names.User("alice", bus.VerbToolsList), kvPrefix + bus.KVKeyConfig, bus.ServiceDiscovery, []byte(`{}`)},
		{names.User("alice", bus.VerbToolsList), names.EventsCatalog(), bus.ServiceDiscovery, []byte(`{}`)},
	}
	for _, a := range attacks {
		before := testutil.ToFloat64(metrics.RepliesDropped.WithLabelValues(a.service))
		if err := alice.NC.PublishRequest(a.subject, a.reply, a.body); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, "the request on "+a.subject+" with reply "+a.reply+" to be counted as dropped", func() bool {
			return testutil.ToFloat64(metrics.RepliesDropped.WithLabelValues(a.service)) > before
		})
		testkit.Eventually(t, 30*time.Second, "the audit record of the reply "+a.reply, func() bool {
			recs, err := audit.Read(ctx, st.js, names, audit.Filter{Kind: audit.KindReplyDropped, User: "alice", Limit: audit.MaxLimit})
			return err == nil && slices.ContainsFunc(recs, func(r audit.Record) bool {
				return r.Reply == a.reply && r.Subject == a.subject && r.Service == a.service
			})
		})
	}

	// A reply the services published would have been flushed before the
	// drops they counted after it; the observer's round trip covers its
	// own delivery.
	if err := observer.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(landed) > 0 {
		t.Errorf("messages landed on forged reply subjects: %v", landed)
	}
	mu.Unlock()
	if g, c := revision(bus.KVKeyGen), revision(bus.KVKeyConfig); g != genRev || c != cfgRev {
		t.Errorf("config bucket written: generation revision %d → %d, config %d → %d", genRev, g, cfgRev, c)
	}
	recs, err := audit.Read(ctx, st.js, names, audit.Filter{Kind: audit.KindCall, User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) > 0 {
		t.Errorf("calls ran as bob: %+v", recs)
	}
	if _, err := request[bus.ToolsCallReply](alice.NC, aliceCall, bus.Call{Tool: "demo_echo", Arguments: []byte(`{"message":"still mine"}`)}); err != nil {
		t.Errorf("alice's own call after the attacks: %v", err)
	}
}

// TestNATSServicesUsersCannotPublishUserSubjects shows what the shipped
// accounts.conf refuses every service's own NATS user: publishing on any
// user's subject (no service ever does, so no reply can be made to land
// there). The KV buckets and the events stream some must write; there the
// services' reply check is the guard (TestNATSReplySubjectsCannotBeForged).
func TestNATSServicesUsersCannotPublishUserSubjects(t *testing.T) {
	p := startPermNATS(t, nil)
	names := bus.Names{}.WithUserSubjects(true)
	subject := names.User("bob", bus.VerbToolsCall)
	for _, svc := range []string{bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceTaskpoller, bus.ServiceAPI} {
		u := testkit.ConnectNATSUser(t, p.url(""), svc, p.pw[userVar(svc)], "")
		if err := u.NC.Publish(subject, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		u.Refused(t, svc+" publishing "+subject, subject)
	}
}
