package kvcache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/kvcache"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// countingKV is a real bucket that counts the reads that reach it.
type countingKV struct {
	jetstream.KeyValue
	gets atomic.Int64
}

func (k *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	k.gets.Add(1)
	return k.KeyValue.Get(ctx, key)
}

func decode(b []byte) (string, error) { return string(b), nil }

// replicas are two processes' caches of one bucket (two connections).
type replicas struct {
	kv     jetstream.KeyValue
	a, b   *kvcache.Cache[string]
	ka, kb *countingKV
}

func start(t *testing.T, opt kvcache.Options) *replicas {
	t.Helper()
	bus := testkit.StartBus(t)
	ctx := context.Background()
	kv, err := bus.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bus.Names.Namespace() + "_KVCACHE_TEST", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := &replicas{kv: kv}
	for _, side := range []struct {
		c **kvcache.Cache[string]
		k **countingKV
	}{{&r.a, &r.ka}, {&r.b, &r.kb}} {
		nc := bus.Connect(t)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		own, err := js.KeyValue(ctx, kv.Bucket())
		if err != nil {
			t.Fatal(err)
		}
		*side.k = &countingKV{KeyValue: own}
		o := opt
		if o.SyncSubject != "" {
			o.NC, o.SyncSubject = nc, bus.Names.Internal(o.SyncSubject)
		}
		*side.c = kvcache.New[string](*side.k, decode, o)
		if err := (*side.c).Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup((*side.c).Stop)
	}
	return r
}

func get(t *testing.T, c *kvcache.Cache[string], key string) (string, bool) {
	t.Helper()
	v, ok, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return v, ok
}

// TestWritesOfOneReplicaReachTheOther: a key put through A is read at once
// on B (from the bucket, B's watch may not have it yet), then served from
// B's mirror without reads; a purge through A with the sync subject is a
// miss on B as soon as Purge returns.
func TestWritesOfOneReplicaReachTheOther(t *testing.T) {
	t.Parallel()
	r := start(t, kvcache.Options{SyncSubject: "kvcache.test.sync"})
	ctx := context.Background()
	if err := r.a.Put(ctx, "s1", []byte("v1"), "v1"); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, r.b, "s1"); !ok || v != "v1" {
		t.Fatalf("B after A's put: %q %v", v, ok)
	}
	if v, ok := get(t, r.a, "s1"); !ok || v != "v1" || r.ka.gets.Load() != 0 {
		t.Fatalf("A's own put: %q %v, %d bucket reads", v, ok, r.ka.gets.Load())
	}
	testkit.Eventually(t, 10*time.Second, "B's watch to deliver s1", func() bool {
		before := r.kb.gets.Load()
		get(t, r.b, "s1")
		return r.kb.gets.Load() == before
	})
	if err := r.a.Put(ctx, "s1", []byte("v2"), "v2"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "B's mirror to follow A's second put", func() bool {
		v, _ := get(t, r.b, "s1")
		return v == "v2"
	})
	if err := r.a.Purge(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	// B's mirror held v2: only the sync makes it drop the key before
	// Purge returns.
	if v, ok := get(t, r.b, "s1"); ok {
		t.Errorf("B right after A's purge: %q", v)
	}
	if _, ok := get(t, r.a, "s1"); ok {
		t.Error("A right after its purge still has s1")
	}
}

// TestAuthoritativeMissesAndInvalidate: with AuthoritativeMisses a key
// nobody wrote is a miss without a read; a put by A that B was told about
// (Invalidate) is read by B at once.
func TestAuthoritativeMissesAndInvalidate(t *testing.T) {
	t.Parallel()
	r := start(t, kvcache.Options{AuthoritativeMisses: true})
	if _, ok := get(t, r.b, "p1"); ok || r.kb.gets.Load() != 0 {
		t.Fatalf("a key nobody wrote: ok=%v after %d reads", ok, r.kb.gets.Load())
	}
	if err := r.a.Put(context.Background(), "p1", []byte("x"), "x"); err != nil {
		t.Fatal(err)
	}
	r.b.Invalidate("p1")
	if v, ok := get(t, r.b, "p1"); !ok || v != "x" {
		t.Fatalf("B after the announced put: %q %v", v, ok)
	}
	if r.kb.gets.Load() != 1 {
		t.Errorf("B read the bucket %d times, want 1", r.kb.gets.Load())
	}
}

// TestEntriesOlderThanTheTTLAreReadAgain: the bucket expires entries
// without telling watchers, so a mirrored entry older than the TTL is read
// from the bucket (which here no longer has it).
func TestEntriesOlderThanTheTTLAreReadAgain(t *testing.T) {
	t.Parallel()
	var now atomic.Pointer[time.Time]
	t0 := time.Now()
	now.Store(&t0)
	r := start(t, kvcache.Options{TTL: time.Minute, Now: func() time.Time { return *now.Load() }})
	ctx := context.Background()
	if err := r.a.Put(ctx, "e1", []byte("v"), "v"); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, r.a, "e1"); !ok || r.ka.gets.Load() != 0 {
		t.Fatalf("a fresh entry: ok=%v after %d reads", ok, r.ka.gets.Load())
	}
	// Removed behind the mirror's back, as the bucket's expiry does
	// (a purge the watch delivers would drop it anyway: wait for that).
	later := t0.Add(2 * time.Minute)
	now.Store(&later)
	if _, ok := get(t, r.a, "e1"); !ok || r.ka.gets.Load() != 1 {
		t.Errorf("an entry past the TTL still in the bucket: ok=%v after %d reads (want 1)", ok, r.ka.gets.Load())
	}
	if err := r.kv.Purge(ctx, "e1"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the purge to reach A", func() bool {
		_, ok := get(t, r.a, "e1")
		return !ok
	})
}
