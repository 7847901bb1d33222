package quota_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/quota"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestWindowAcrossReplicas: two counters on one bucket (two replicas)
// share each window: of 40 concurrent takes with a limit of 5, exactly 5
// pass, the refusals say when the window ends, and the next window (the
// clock moved on) allows 5 again; another subject has its own window.
func TestWindowAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv := quotaBucket(t)
	clk := &clock{now: time.Unix(1_000_000_040, 0)} // 20 s into a minute window
	replicas := []*quota.Counter{quota.New(kv, clk.Now), quota.New(kv, clk.Now)}
	take := func(subject string, retry time.Duration) int {
		var allowed atomic.Int32
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := replicas[i%2].Take(ctx, subject, 5, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				} else if d.RetryAfter != retry {
					t.Errorf("refused with RetryAfter %s; want %s (the window's end)", d.RetryAfter, retry)
				}
			}()
		}
		wg.Wait()
		return int(allowed.Load())
	}
	if n := take("alice", 40*time.Second); n != 5 {
		t.Fatalf("%d of 40 concurrent takes allowed; want 5", n)
	}
	if n := take("bob", 40*time.Second); n != 5 {
		t.Fatalf("another subject: %d allowed; want 5", n)
	}
	clk.Add(40 * time.Second) // the start of the next window
	if n := take("alice", time.Minute); n != 5 {
		t.Fatalf("the next window: %d allowed; want 5", n)
	}
}

// TestPeekDoesNotCount: Peek says what Take would decide without taking:
// allowed below the limit (any number of peeks counting nothing), refused
// with the window's end once another replica took the last call.
func TestPeekDoesNotCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv := quotaBucket(t)
	clk := &clock{now: time.Unix(1_000_000_070, 0)} // 10 s before a minute window ends
	peeker, taker := quota.New(kv, clk.Now), quota.New(kv, clk.Now)
	for range 5 {
		if d, err := peeker.Peek(ctx, "s", 2, time.Minute); err != nil || !d.Allowed || d.Used != 0 {
			t.Fatalf("peek on an empty window: %+v %v", d, err)
		}
	}
	for range 2 {
		if d, _ := taker.Take(ctx, "s", 2, time.Minute); !d.Allowed {
			t.Fatalf("take below the limit refused: %+v", d)
		}
	}
	if d, err := peeker.Peek(ctx, "s", 2, time.Minute); err != nil || d.Allowed || d.Used != 2 || d.RetryAfter != 10*time.Second {
		t.Fatalf("peek at the limit: %+v %v", d, err)
	}
	clk.Add(10 * time.Second)
	if d, _ := peeker.Peek(ctx, "s", 2, time.Minute); !d.Allowed {
		t.Fatalf("peek in the next window: %+v", d)
	}
}

// TestUsageOfAGroup: ReadUsage sums a group's current window (every
// subject under it), not other groups' nor other windows'.
func TestUsageOfAGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv := quotaBucket(t)
	clk := &clock{now: time.Unix(1_700_000_000, 0).Truncate(time.Minute)}
	c := quota.New(kv, clk.Now)
	take := func(group, subject string, n int) {
		for range n {
			if _, err := c.TakeIn(ctx, group, subject, 100, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	take("set-a.0", "alice", 3)
	take("set-a.0", "bob", 2)
	take("set-a.1", "alice", 4)
	take("", "alice", 5)
	u, err := quota.ReadUsage(ctx, kv, "set-a.0", time.Minute, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if u.Subjects != 2 || u.Calls != 5 || !u.WindowEnd.Equal(clk.Now().Add(time.Minute)) {
		t.Errorf("usage of set-a.0 %+v; want 2 subjects, 5 calls, the window's end", u)
	}
	clk.Add(time.Minute)
	if u, err := quota.ReadUsage(ctx, kv, "set-a.0", time.Minute, clk.Now); err != nil || u.Calls != 0 {
		t.Errorf("the next window: %+v %v; want nothing counted", u, err)
	}
}

// TestSemaphoreAcrossReplicas: two counters on one bucket (two replicas)
// share a semaphore: of 20 concurrent acquires with a limit of 3, exactly
// 3 hold a slot whichever replica asked, the refusals say to retry in a
// second; a release frees a slot for the other replica; the calls in
// flight are read back per group with the replicas that run them.
func TestSemaphoreAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv := quotaBucket(t)
	clk := &clock{now: time.Unix(1_000_000_000, 0)}
	replicas := []*quota.Counter{quota.New(kv, clk.Now), quota.New(kv, clk.Now)}
	names := []string{"replica-a", "replica-b"}
	var mu sync.Mutex
	var slots []*quota.Slot
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, d, err := replicas[i%2].Acquire(ctx, "set.1", "alice/tool", names[i%2], 3, quota.DefaultLease)
			switch {
			case err != nil:
				t.Error(err)
			case s != nil:
				mu.Lock()
				slots = append(slots, s)
				mu.Unlock()
			case d.Allowed || d.Used != 3 || d.RetryAfter != time.Second:
				t.Errorf("refusal %+v; want 3 in flight, retry in a second", d)
			}
		}()
	}
	wg.Wait()
	if len(slots) != 3 {
		t.Fatalf("%d of 20 concurrent acquires hold a slot; want 3", len(slots))
	}
	if f, err := quota.ReadInFlight(ctx, kv, "set.1", clk.Now); err != nil || f.Calls != 3 {
		t.Fatalf("in flight %+v %v; want 3 calls", f, err)
	}
	for _, r := range replicas {
		if s, _, err := r.Acquire(ctx, "set.1", "alice/tool", "replica-x", 3, quota.DefaultLease); err != nil || s != nil {
			t.Fatalf("a fourth call: %v %v; want refused", s, err)
		}
	}
	// Another subject has its own slots.
	if s, _, err := replicas[0].Acquire(ctx, "set.1", "bob/tool", "replica-a", 3, quota.DefaultLease); err != nil || s == nil {
		t.Fatalf("bob refused: %v", err)
	}
	if err := slots[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := slots[0].Release(ctx); err != nil { // twice is nothing more
		t.Fatal(err)
	}
	s, _, err := replicas[1].Acquire(ctx, "set.1", "alice/tool", "replica-b", 3, quota.DefaultLease)
	if err != nil || s == nil {
		t.Fatalf("after a release: %v; want a slot", err)
	}
	if s2, _, _ := replicas[0].Acquire(ctx, "set.1", "alice/tool", "replica-a", 3, quota.DefaultLease); s2 != nil {
		t.Fatal("a release freed two slots")
	}
	if f, err := quota.ReadInFlight(ctx, kv, "set.1", clk.Now); err != nil || f.Calls != 4 || f.Replicas != 2 {
		t.Errorf("in flight %+v %v; want 4 calls (3 alice, 1 bob) on 2 replicas", f, err)
	}
	if f, err := quota.ReadInFlight(ctx, kv, "set.2", clk.Now); err != nil || f.Calls != 0 {
		t.Errorf("another group: %+v %v; want nothing", f, err)
	}
}

// TestSemaphoreSlotOfADeadReplicaExpires: a replica that dies mid-call
// stops renewing; its slot still counts within the lease, and once the
// lease has passed (the clock moved, no waiting) the next acquire prunes
// it and takes the slot. A renewed slot outlives its first lease, and a
// slot pruned before its renewal is lost, not taken again.
func TestSemaphoreSlotOfADeadReplicaExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv := quotaBucket(t)
	clk := &clock{now: time.Unix(1_000_000_000, 0)}
	dead, live := quota.New(kv, clk.Now), quota.New(kv, clk.Now)
	lease := 30 * time.Second
	if s, _, err := dead.Acquire(ctx, "g.0", "s", "dead", 1, lease); err != nil || s == nil {
		t.Fatalf("first acquire: %v", err)
	}
	// The dead replica never releases nor renews.
	clk.Add(lease - time.Millisecond)
	if s, _, _ := live.Acquire(ctx, "g.0", "s", "live", 1, lease); s != nil {
		t.Fatal("the slot was taken again within its lease")
	}
	clk.Add(time.Millisecond)
	s, _, err := live.Acquire(ctx, "g.0", "s", "live", 1, lease)
	if err != nil || s == nil {
		t.Fatalf("after the lease: %v; want the expired slot pruned and taken", err)
	}
	// Renewed, the live slot outlives its first lease.
	clk.Add(lease - time.Second)
	if err := s.Renew(ctx, lease); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Second)
	if s2, _, _ := dead.Acquire(ctx, "g.0", "s", "other", 1, lease); s2 != nil {
		t.Fatal("a renewed slot was pruned at its first expiry")
	}
	if f, err := quota.ReadInFlight(ctx, kv, "g.0", clk.Now); err != nil || f.Calls != 1 || f.Replicas != 1 {
		t.Errorf("in flight %+v %v; want the live call only", f, err)
	}
	// Not renewed in time, it is pruned and lost.
	clk.Add(lease)
	if s2, _, err := dead.Acquire(ctx, "g.0", "s", "other", 1, lease); err != nil || s2 == nil {
		t.Fatalf("after the renewed lease: %v", err)
	}
	if err := s.Renew(ctx, lease); !errors.Is(err, quota.ErrSlotLost) {
		t.Errorf("renewal of a pruned slot: %v; want ErrSlotLost", err)
	}
}

// quotaBucket is a fresh quota bucket on its own bus.
func quotaBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	b := testkit.StartBus(t)
	kv, err := bus.QuotasKV(context.Background(), b.JS, b.Names, 1)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}
