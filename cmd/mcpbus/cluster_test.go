package main_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestReplicasAutoOnAThreeNodeCluster runs a deployment with the default
// nats.replicas (auto) on three nats-server processes: every bucket and
// stream it keeps gets three replicas, including the ones an earlier start
// left with one; then the audit stream's leader is killed while records
// are written, and every record arrives exactly once.
func TestReplicasAutoOnAThreeNodeCluster(t *testing.T) {
	t.Parallel()
	cluster := testkit.StartNATSCluster(t, 3)
	names := testkit.RandomNames(t)
	nc, err := bus.Connect(cluster.URL, "cluster-test", bus.Auth{}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// What nats.replicas: 1 left behind, before the operator raised it
	// (retried: right after a bucket's creation a fresh cluster may not
	// have its stream everywhere yet).
	for what, create := range map[string]func() error{
		"presence": func() error { _, err := bus.PresenceKV(ctx, js, names, 1); return err },
		"sessions": func() error {
			_, err := bus.MCPSessionsKV(ctx, js, names, 1, time.Hour, config.DefaultSettings().API.MCP.SessionBucketMaxBytes)
			return err
		},
		"promotions": func() error { _, err := bus.MCPPromotionsKV(ctx, js, names, 1, time.Hour); return err },
	} {
		testkit.Eventually(t, 30*time.Second, "the single-copy "+what+" bucket", func() bool { return create() == nil })
	}

	startStack(t, cluster.URL, names, fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": %q}}}`, demoBin))
	for _, name := range names.Streams() {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) && name == "KV_"+names.MCPStatesBucket() {
			continue // made on first use of a request state, with the same count
		}
		if err != nil {
			t.Errorf("stream %s: %v", name, err)
			continue
		}
		if got := s.CachedInfo().Config.Replicas; got != 3 {
			t.Errorf("stream %s has %d replicas, want 3", name, got)
		}
	}

	// The audit stream keeps every record through its leader's loss.
	w, err := audit.NewWriter(ctx, nc, names, audit.WriterOptions{Settings: config.DefaultAudit(), Log: testkit.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	const total = 400
	write := func(from, to int) {
		for i := from; i < to; i++ {
			w.Write(ctx, audit.Record{Kind: audit.KindCall, User: "failover", Thread: fmt.Sprint(i), Tool: "demo_echo", Server: "demo", Outcome: "ok"})
		}
	}
	write(0, total/2)
	s, err := js.Stream(ctx, names.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("audit stream leader: %v %+v", err, info)
	}
	cluster.Node(t, info.Cluster.Leader).Kill()
	write(total/2, total)
	if err := w.Close(ctx); err != nil {
		t.Fatalf("close the audit writer: %v", err)
	}
	subject := names.AuditCall("failover", "demo_echo")
	var stored uint64
	testkit.Eventually(t, 60*time.Second, "the surviving nodes to report the audit stream", func() bool {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			return false
		}
		stored = info.State.Subjects[subject]
		return true
	})
	if stored != total {
		t.Errorf("the audit stream holds %d of the %d records written across the leader's loss", stored, total)
	}
}
