package presence_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/presence"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

func presenceKV(t *testing.T) jetstream.KeyValue {
	t.Helper()
	b := testkit.StartBus(t)
	kv, err := bus.PresenceKV(context.Background(), b.JS, b.Names, 1)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// start runs a tracker until the test ends or the returned stop is called.
func start(t *testing.T, kv jetstream.KeyValue, self string) (*presence.Tracker, func()) {
	t.Helper()
	tr := presence.New(kv, presence.Config{Group: "svc", Self: self, Interval: 50 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done, err := tr.Start(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return tr, stop
}

func TestReplicasSeeEachOtherAndAgreeOnOwners(t *testing.T) {
	t.Parallel()
	kv := presenceKV(t)
	a, _ := start(t, kv, "a")
	b, _ := start(t, kv, "b")
	c, stopC := start(t, kv, "c")
	all := []string{"a", "b", "c"}
	// b and c read the earlier replicas when they start; a hears of them.
	if !slices.Equal(c.Live(), all) {
		t.Errorf("c started last and sees %v", c.Live())
	}
	testkit.Eventually(t, 10*time.Second, "every replica to see all three", func() bool {
		return slices.Equal(a.Live(), all) && slices.Equal(b.Live(), all) && slices.Equal(c.Live(), all)
	})
	owned := map[string]int{}
	for i := range 300 {
		key := fmt.Sprintf("server|user:thread-%d", i)
		o := a.Owner(key)
		if b.Owner(key) != o || c.Owner(key) != o {
			t.Fatalf("%s: owners %s %s %s", key, o, b.Owner(key), c.Owner(key))
		}
		owned[o]++
	}
	for _, id := range all {
		if owned[id] < 50 {
			t.Errorf("owners are lopsided: %v", owned)
		}
	}

	// Leaving deletes the key: the others drop c at once, not after its
	// heartbeats expire, and only c's keys move.
	changed := 0
	before := map[string]string{}
	for i := range 300 {
		key := fmt.Sprintf("server|user:thread-%d", i)
		before[key] = a.Owner(key)
	}
	stopC()
	testkit.Eventually(t, 10*time.Second, "a and b to drop c", func() bool {
		return slices.Equal(a.Live(), []string{"a", "b"}) && slices.Equal(b.Live(), []string{"a", "b"})
	})
	for key, o := range before {
		if now := a.Owner(key); now != o {
			changed++
			if o != "c" {
				t.Errorf("%s moved from %s to %s though %s is still live", key, o, now, o)
			}
		}
	}
	if changed != owned["c"] {
		t.Errorf("%d keys moved, c owned %d", changed, owned["c"])
	}
}

// A replica that dies without leaving (its key stays) counts as gone once
// its heartbeats stop; one found stale at start is not live at all.
func TestSilentReplicasExpire(t *testing.T) {
	t.Parallel()
	kv := presenceKV(t)
	if _, err := kv.PutString(context.Background(), "svc.ghost", "x"); err != nil {
		t.Fatal(err)
	}
	a, _ := start(t, kv, "a")
	if !slices.Contains(a.Live(), "ghost") {
		t.Fatalf("a fresh heartbeat is not live: %v", a.Live())
	}
	testkit.Eventually(t, 10*time.Second, "the silent replica to expire", func() bool {
		return slices.Equal(a.Live(), []string{"a"})
	})

	// Started long after the ghost's last heartbeat: never live.
	b, _ := start(t, kv, "b")
	if slices.Contains(b.Live(), "ghost") {
		t.Errorf("a stale heartbeat counts as live at start: %v", b.Live())
	}
}

func TestOwnerIsStableAndTotal(t *testing.T) {
	t.Parallel()
	if presence.Owner(nil, "k") != "" {
		t.Error("no replicas must own nothing")
	}
	rs := []string{"r1", "r2", "r3", "r4"}
	for i := range 100 {
		key := fmt.Sprint("k", i)
		o := presence.Owner(rs, key)
		if !slices.Contains(rs, o) {
			t.Fatalf("owner %q is not a replica", o)
		}
		shuffled := []string{"r3", "r1", "r4", "r2"}
		if presence.Owner(shuffled, key) != o {
			t.Fatalf("owner depends on the order of replicas")
		}
	}
}

// A replica a caller found not answering is dropped at once by Gone, long
// before its heartbeats would expire, and comes back with its next one;
// Gone never drops self.
func TestGoneDropsAReplicaUntilItBeatsAgain(t *testing.T) {
	t.Parallel()
	kv := presenceKV(t)
	tr := presence.New(kv, presence.Config{Group: "svc", Self: "a", Interval: time.Hour}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done, err := tr.Start(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	if _, err := kv.PutString(context.Background(), "svc.b", "x"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "a to see b", func() bool {
		return slices.Equal(tr.Live(), []string{"a", "b"})
	})
	gone := tr.GoneCh("b")
	select {
	case <-gone:
		t.Fatal("GoneCh(b) is closed while b is live")
	default:
	}
	tr.Gone("b")
	select {
	case <-gone:
	default:
		t.Fatal("GoneCh(b) stayed open after Gone(b)")
	}
	select {
	case <-tr.GoneCh("nobody"):
	default:
		t.Fatal("GoneCh of a replica that is not live is open")
	}
	if got := tr.Live(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after Gone(b): live %v", got)
	}
	tr.Gone("a")
	if got := tr.Live(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Gone(self) dropped self: live %v", got)
	}
	if _, err := kv.PutString(context.Background(), "svc.b", "y"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "b to rejoin with its next heartbeat", func() bool {
		return slices.Equal(tr.Live(), []string{"a", "b"})
	})
}
