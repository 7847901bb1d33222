package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// A cache reset needs a majority of the config bucket's copies, not the
// copy that led it: with the leader's server gone (cut off, killed) the
// two others elect another leader within seconds, and BumpGeneration,
// started the moment the leader is lost, tries again until the new leader
// takes the compare-and-set, inside the reset's deadline.
func TestBumpGenerationWithTwoOfThreeCopies(t *testing.T) {
	t.Parallel()
	c := testkit.StartNATSCluster(t, 3)
	nc, err := nats.Connect(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	names, err := bus.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := bus.JetStreamSetup(ctx, js, names, 3)
	if err != nil {
		t.Fatal(err)
	}
	first, err := bus.BumpGeneration(ctx, kv)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_"+names.ConfigBucket())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("config bucket's leader: %+v, %v", info, err)
	}
	c.Node(t, info.Cluster.Leader).Kill()
	// The reset's own bound (discovery gives it 15 s).
	rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer rcancel()
	next, err := bus.BumpGeneration(rctx, kv)
	if err != nil {
		t.Fatalf("reset with two of three copies (leader %s lost): %v", info.Cluster.Leader, err)
	}
	if next <= first {
		t.Errorf("generation %d after %d", next, first)
	}
}
