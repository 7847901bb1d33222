package bus_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestBucketsOpenedAtOnceByManyReplicas: replicas starting together each
// create the buckets they need; whoever loses the race opens the winner's
// bucket instead of failing. The NATS server of TEST_NATS_URL is used when
// set (servers before 2.10 answer some losers "subjects overlap with an
// existing stream"), else an embedded one.
func TestBucketsOpenedAtOnceByManyReplicas(t *testing.T) {
	t.Parallel()
	url := os.Getenv("TEST_NATS_URL")
	if url == "" {
		url = testkit.StartBus(t).URL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const replicas = 12
	js := make([]jetstream.JetStream, replicas)
	for i := range js {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if js[i], err = jetstream.New(nc); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 10 {
		names := testkit.RandomNames(t)
		t.Cleanup(func() {
			for _, b := range []string{names.MCPPromotionsBucket(), names.PresenceBucket()} {
				_ = js[0].DeleteKeyValue(context.Background(), b)
			}
		})
		var wg sync.WaitGroup
		errs := make(chan error, 2*replicas)
		for i := range replicas {
			wg.Go(func() {
				if _, err := bus.MCPPromotionsKV(ctx, js[i], names, 1, time.Hour); err != nil {
					errs <- err
				}
				if _, err := bus.PresenceKV(ctx, js[i], names, 1); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
	}
}
