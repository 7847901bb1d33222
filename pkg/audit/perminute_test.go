package audit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestPerMinuteCountsEveryReplicasCalls: two writers (two replicas, each
// on its own connection) record known calls in known minutes; PerMinute
// counts every one of them in its minute, failures (tool errors and error
// codes) as errors, config records and calls before the window not at
// all, and one user's calls alone when asked.
func TestPerMinuteCountsEveryReplicasCalls(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	ctx := context.Background()
	settings := config.AuditSettings{Enabled: true}
	now := time.Now().UTC()
	minute := func(ago int) time.Time {
		return now.Truncate(time.Minute).Add(-time.Duration(ago)*time.Minute + 7*time.Second)
	}
	var writers []*audit.Writer
	for range 2 {
		w, err := audit.NewWriter(ctx, b.Connect(t), b.Names, audit.WriterOptions{Settings: settings})
		if err != nil {
			t.Fatal(err)
		}
		writers = append(writers, w)
	}
	calls := []struct {
		replica, ago  int
		user, outcome string
	}{
		{0, 2, "alice", "ok"}, {1, 2, "bob", "tool_error"}, {1, 2, "alice", "ok"},
		{0, 0, "alice", "ok"}, {1, 0, "bob", "upstream_error"},
		{0, 30, "alice", "ok"}, // before the window
	}
	for i, c := range calls {
		writers[c.replica].Write(ctx, audit.Record{Kind: audit.KindCall, Time: minute(c.ago), User: c.user, Tool: fmt.Sprint("t", i), Outcome: c.outcome})
	}
	writers[0].Write(ctx, audit.Record{Kind: audit.KindConfig, User: "root", Action: "put_config"})
	for _, w := range writers {
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	js, _ := jetstream.New(b.NC)
	got, err := audit.PerMinute(ctx, js, b.Names, "", now, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []audit.Minute{{Calls: 0}, {Calls: 0}, {Calls: 3, Errors: 1}, {Calls: 0}, {Calls: 2, Errors: 1}}
	for i := range want {
		want[i].Start = now.Truncate(time.Minute).Add(time.Duration(i-4) * time.Minute)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("per minute:\n got %v\nwant %v", got, want)
	}
	got, err = audit.PerMinute(ctx, js, b.Names, "alice", now, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got[2].Calls != 2 || got[2].Errors != 0 || got[4].Calls != 1 || got[4].Errors != 0 {
		t.Fatalf("alice's calls per minute: %v", got)
	}
}
