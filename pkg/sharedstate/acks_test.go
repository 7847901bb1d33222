package sharedstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestAcksCountEachServicesReplicas: a watcher that acknowledges is
// counted once it applied the generation; a replica still on an older
// generation is counted as listed but not acknowledged; a watcher that
// stops is no longer listed.
func TestAcksCountEachServicesReplicas(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	w := sharedstate.NewWatcher(b.KV, nil, observability.Discard())
	w.AckTo(b.Presence, "toolcall", "r1")
	ctx, stop := context.WithCancel(context.Background())
	done, err := w.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); <-done })

	bg := context.Background()
	gen, err := bus.BumpGeneration(bg, b.KV)
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	acks, err := sharedstate.AwaitAcks(wait, b.JS, b.Presence, gen)
	if err != nil || acks["toolcall"] != (bus.ReplicaAcks{Replicas: 1, Acknowledged: 1}) {
		t.Fatalf("acks %+v, %v; want toolcall 1 of 1", acks, err)
	}

	// A discovery replica that has not applied gen yet.
	if _, err := b.Presence.PutString(bg, "gen.discovery.r2", "0"); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancelShort()
	acks, err = sharedstate.AwaitAcks(short, b.JS, b.Presence, gen)
	if err != nil || acks["discovery"] != (bus.ReplicaAcks{Replicas: 1, Acknowledged: 0}) || acks["toolcall"].Acknowledged != 1 {
		t.Fatalf("acks %+v, %v; want discovery 0 of 1 and toolcall 1 of 1", acks, err)
	}

	// The watcher leaves: its key goes.
	stop()
	<-done
	testkit.Eventually(t, 10*time.Second, "the stopped watcher's acknowledgement to go", func() bool {
		_, err := b.Presence.Get(bg, "gen.toolcall.r1")
		return err != nil
	})
}
