package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestReplicasAutoOnOneServer: auto is 1 outside a cluster, and every
// stream already has it (nothing to change).
func TestReplicasAutoOnOneServer(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	if n := bus.ClusterSize(b.NC); n != 1 {
		t.Errorf("cluster size of one embedded server = %d", n)
	}
	if n := bus.StreamReplicas(b.JS, 0); n != 1 {
		t.Errorf("auto on one server = %d replicas, want 1", n)
	}
	if n := bus.StreamReplicas(b.JS, 3); n != 3 {
		t.Errorf("an explicit 3 resolved to %d", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	changed, errs := bus.ReconcileReplicas(ctx, b.JS, b.Names, b.Names.Streams(), 0)
	if len(changed) != 0 || len(errs) != 0 {
		t.Errorf("reconcile to auto on one server: changed %v, errors %v", changed, errs)
	}
}

// TestReconcileReplicasReportsAStreamItCannotChange: three replicas on a
// single server cannot be had; each existing stream is reported by name
// and keeps serving with one.
func TestReconcileReplicasReportsAStreamItCannotChange(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	changed, errs := bus.ReconcileReplicas(ctx, b.JS, b.Names, b.Names.Streams(), 3)
	if len(changed) != 0 {
		t.Errorf("changed %v on a single server", changed)
	}
	joined := ""
	for _, err := range errs {
		joined += err.Error() + "\n"
	}
	for _, name := range []string{"KV_" + b.Names.ConfigBucket(), "KV_" + b.Names.PresenceBucket(), b.Names.EventsStream()} {
		if !strings.Contains(joined, "stream "+name+": keeps 1 replicas, not 3") {
			t.Errorf("no warning for %s in:\n%s", name, joined)
		}
	}
	if _, err := b.KV.Put(ctx, "still-serving", []byte("yes")); err != nil {
		t.Errorf("the config bucket after a refused update: %v", err)
	}
}
