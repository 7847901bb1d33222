package testkit_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestNamespaceLeavesNothingOnTheSharedServer: what a test creates under
// RandomNames on the server of TEST_NATS_URL (a bucket, a stream) is gone
// once the test ends, and SweepStaleNamespaces leaves a young namespace
// alone. An embedded server stands in when TEST_NATS_URL is unset.
func TestNamespaceLeavesNothingOnTheSharedServer(t *testing.T) {
	url := os.Getenv("TEST_NATS_URL")
	if url == "" {
		url = testkit.StartBus(t).URL
		t.Setenv("TEST_NATS_URL", url)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var names bus.Names
	t.Run("a test", func(t *testing.T) {
		names = testkit.RandomNames(t)
		if _, err := bus.MCPSessionsKV(ctx, js, names, 1, time.Hour, 1<<20); err != nil {
			t.Fatal(err)
		}
		if _, err := bus.PresenceKV(ctx, js, names, 1); err != nil {
			t.Fatal(err)
		}
		if n, err := testkit.SweepStaleNamespaces(url, time.Hour); err != nil || exists(ctx, t, js, names.PresenceBucket()) == false {
			t.Fatalf("the sweep removed a young namespace (%d streams, %v)", n, err)
		}
	})
	for _, bucket := range []string{names.MCPSessionsBucket(), names.PresenceBucket()} {
		if exists(ctx, t, js, bucket) {
			t.Errorf("bucket %s is still on the server after its test ended", bucket)
		}
	}
}

func exists(ctx context.Context, t *testing.T, js jetstream.JetStream, bucket string) bool {
	t.Helper()
	_, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
