package bus_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// The empty namespace keeps today's names exactly; a namespace prefixes
// every subject with "<ns>." and every bucket, stream and micro service
// name with "<ns>_".
func TestNames(t *testing.T) {
	t.Parallel()
	stg, err := bus.NewNames("stg")
	if err != nil {
		t.Fatal(err)
	}
	var def bus.Names
	for _, c := range []struct{ got, want string }{
		{def.ToolsList(), "mcpbus.tools.list"},
		{def.ToolsSearch(), "mcpbus.tools.search"},
		{def.ToolsCall(), "mcpbus.tools.call"},
		{def.CacheReset(), "mcpbus.cache.reset"},
		{def.TasksList(), "mcpbus.tasks.list"},
		{def.TasksGet(), "mcpbus.tasks.get"},
		{def.TasksCancel(), "mcpbus.tasks.cancel"},
		{def.InternalCall(), "mcpbus.internal.call"},
		{def.InternalToken(), "mcpbus.internal.token"},
		{def.InternalCatalog(), "mcpbus.internal.catalog"},
		{def.InternalServers(), "mcpbus.internal.servers"},
		{def.InternalPersonal(), "mcpbus.internal.personal"},
		{def.Health(bus.ServiceAPI), "mcpbus.internal.health.mcpbus-api"},
		{def.EventsAll(), "mcpbus.events.>"},
		{def.EventsCatalog(), "mcpbus.events.catalog"},
		{def.TaskEvents("th"), "mcpbus.events.tasks.th"},
		{def.PersonalEventsAll(), "mcpbus.events.personal.>"},
		{def.ConfigBucket(), "MCPBUS"},
		{def.PresenceBucket(), "MCPBUS_PRESENCE"},
		{def.EventsStream(), "MCPBUS_EVENTS"},
		{def.Service(bus.ServiceDiscovery), "mcpbus-discovery"},
		{stg.ToolsCall(), "stg.mcpbus.tools.call"},
		{stg.Internal("toolcall.sessions.close"), "stg.mcpbus.internal.toolcall.sessions.close"},
		{stg.EventsAll(), "stg.mcpbus.events.>"},
		{stg.PersonalEvents("a.b"), "stg.mcpbus.events.personal.a_b"},
		{stg.ConfigBucket(), "stg_MCPBUS"},
		{stg.PresenceBucket(), "stg_MCPBUS_PRESENCE"},
		{stg.EventsStream(), "stg_MCPBUS_EVENTS"},
		{stg.Service(bus.ServiceDiscovery), "stg_mcpbus-discovery"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if d, _ := bus.NewNames(""); d != def {
		t.Error(`NewNames("") is not the default names`)
	}
	for _, bad := range []string{"a.b", "a*", ">", "a b", "ä", "x/y"} {
		if _, err := bus.NewNames(bad); err == nil {
			t.Errorf("namespace %q accepted", bad)
		}
	}
}

// User tokens are one subject token each, one-to-one with user ids.
func TestUserToken(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, id := range []string{"alice", "a_b", "a.b", "a*b", "a>b", "a b", "~x", "alice@example.com", "ü", strings.Repeat("x", 64), strings.Repeat("x", 65)} {
		tok := bus.UserToken(id)
		if strings.ContainsAny(tok, ".*> \t") || tok == "" {
			t.Errorf("%q: token %q is not one subject token", id, tok)
		}
		if other, ok := seen[tok]; ok {
			t.Errorf("%q and %q share the token %q", id, other, tok)
		}
		seen[tok] = id
		if back, ok := bus.ParseUserToken(tok); !ok || back != id {
			t.Errorf("%q: token %q parses back to %q, %v", id, tok, back, ok)
		}
	}
	for _, bad := range []string{"", "~", "~!!", "a.b", "~" + "YQ"} { // "~YQ" is "a", whose token is "a"
		if id, ok := bus.ParseUserToken(bad); ok {
			t.Errorf("token %q parsed as %q", bad, id)
		}
	}
	n, _ := bus.NewNames("stg")
	if got := n.User("alice@example.com", bus.VerbToolsCall); got != "stg.mcpbus.u.~YWxpY2VAZXhhbXBsZS5jb20.tools.call" {
		t.Errorf("user subject %q", got)
	}
	if got := n.AnyUser(bus.VerbTasksGet); got != "stg.mcpbus.u.*.tasks.get" {
		t.Errorf("any-user subject %q", got)
	}
	if u, ok := n.UserOf(n.User("a.b", bus.VerbTasksList)); !ok || u != "a.b" {
		t.Errorf("UserOf = %q, %v", u, ok)
	}
	if _, ok := n.UserOf(n.TasksList()); ok {
		t.Error("the plain subject binds a user")
	}
	if _, ok := (bus.Names{}).UserOf(n.User("alice", bus.VerbTasksList)); ok {
		t.Error("another namespace's subject binds a user")
	}
}

// On a per-user subject the handler sees the subject's user; another
// user_id in the body is forbidden, a body that is not an object invalid.
func TestBindUser(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	names := b.Names.WithUserSubjects(true)
	sc := b.Connect(t)
	svc, err := micro.AddService(sc, micro.Config{Name: "bindtest", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	var wg sync.WaitGroup
	echo := bus.Handler(context.Background(), &wg, nil, func(_ context.Context, req bus.TaskListRequest) (bus.TaskListRequest, error) {
		return req, nil
	})
	if err := svc.AddEndpoint("e", bus.BindUser(names, nil, echo), micro.WithEndpointSubject(names.AnyUser(bus.VerbTasksList))); err != nil {
		t.Fatal(err)
	}
	if err := sc.Flush(); err != nil { // the subscription is on the server
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		user string
		body any
		want string
		code error
	}{
		{"alice", bus.TaskListRequest{ThreadID: "th"}, "alice", nil},
		{"alice", bus.TaskListRequest{UserID: "alice", ThreadID: "th"}, "alice", nil},
		{"a.b@c", nil, "a.b@c", nil},
		{"alice", bus.TaskListRequest{UserID: "bob"}, "", bus.ErrForbidden},
		{"alice", []string{"x"}, "", bus.ErrInvalidRequest},
		{"alice", map[string]any{"user_id": 7}, "", bus.ErrInvalidRequest},
	} {
		got, err := bus.Request[bus.TaskListRequest](ctx, b.NC, names.User(c.user, bus.VerbTasksList), c.body)
		if c.code != nil {
			if !errors.Is(err, c.code) {
				t.Errorf("%s %v: %v, want %v", c.user, c.body, err, c.code)
			}
			continue
		}
		if err != nil || got.UserID != c.want {
			t.Errorf("%s %v: handler saw %+v, %v", c.user, c.body, got, err)
		}
	}
}

// A NATS URL's password or token never reaches an error.
func TestConnectErrorRedactsCredentials(t *testing.T) {
	t.Parallel()
	_, err := bus.Connect("nats://svc:s3cr3t-pw@127.0.0.1:1,nats://tok3n-value@127.0.0.1:2", "t", bus.Auth{}, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("connected to nothing")
	}
	for _, secret := range []string{"s3cr3t-pw", "tok3n-value"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error carries %q: %v", secret, err)
		}
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("error does not say where: %v", err)
	}
	if _, err := bus.Connect("nats://127.0.0.1:1", "t", bus.Auth{TokenFile: "/nonexistent/token"}, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "token file") {
		t.Errorf("missing token file: %v", err)
	}
}

// A handler learns the user of the per-user subject its request came in
// on (bus.BoundUser), and nothing on the plain subject.
func TestBoundUserOnlyOnPerUserSubjects(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	names := b.Names.WithUserSubjects(true)
	sc := b.Connect(t)
	svc, err := micro.AddService(sc, micro.Config{Name: "boundtest", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	type seen struct {
		User  string `json:"user"`
		Bound bool   `json:"bound"`
	}
	var wg sync.WaitGroup
	h := bus.Handler(context.Background(), &wg, nil, func(ctx context.Context, _ bus.TaskListRequest) (seen, error) {
		u, ok := bus.BoundUser(ctx)
		return seen{u, ok}, nil
	})
	if err := errors.Join(
		svc.AddEndpoint("plain", h, micro.WithEndpointSubject(names.TasksList())),
		svc.AddEndpoint("user", bus.BindUser(names, nil, h), micro.WithEndpointSubject(names.AnyUser(bus.VerbTasksList))),
	); err != nil {
		t.Fatal(err)
	}
	if err := sc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		subject string
		want    seen
	}{
		{names.User("alice", bus.VerbTasksList), seen{"alice", true}},
		{names.User("a.b@c", bus.VerbTasksList), seen{"a.b@c", true}},
		{names.TasksList(), seen{}},
	} {
		got, err := bus.Request[seen](ctx, b.NC, c.subject, bus.TaskListRequest{ThreadID: "th"})
		if err != nil || got != c.want {
			t.Errorf("%s: handler saw %+v, %v; want %+v", c.subject, got, err, c.want)
		}
	}
}

// A progress inbox of a per-user call is the user's own NATS inbox prefix
// and one token, the form nats.go's NewInbox gives a connection with
// CustomInboxPrefix("_INBOX_<token>"); nothing else.
func TestCheckInboxOfAUserBoundCall(t *testing.T) {
	t.Parallel()
	if got := bus.UserInboxPrefix("alice@example.com"); got != "_INBOX_~YWxpY2VAZXhhbXBsZS5jb20." {
		t.Errorf("inbox prefix %q", got)
	}
	n, _ := bus.NewNames("stg")
	for _, ok := range []string{"_INBOX_alice.abc", "_INBOX_alice.Zx-_9", "_INBOX_alice." + strings.Repeat("a", 64)} {
		if err := bus.CheckInbox("progress_inbox", ok, n.ProgressInboxPrefix(), "alice", true); err != nil {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"_INBOX_alice.", "_INBOX_alice", "_INBOX_alice.a.b", "_INBOX_alice.*", "_INBOX_alice.>",
		"_INBOX_alice." + strings.Repeat("a", 65), "_INBOX_bob.abc", "_INBOX_alicex.abc", "_INBOX.abc", "_INBOX_~YWxpY2U.abc",
		n.NewProgressInbox(), (bus.Names{}).NewProgressInbox(), n.InternalCall(), "stg._INBOX_alice.abc"} {
		if err := bus.CheckInbox("ask_inbox", bad, n.AskInboxPrefix(), "alice", true); err == nil || !strings.Contains(err.Error(), "ask_inbox") {
			t.Errorf("%q for alice: %v, want an error naming ask_inbox", bad, err)
		}
	}
}
