package quota_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	b := testkit.StartBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := bus.QuotasKV(ctx, b.JS, b.Names, 1)
	if err != nil {
		t.Fatal(err)
	}
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
	b := testkit.StartBus(t)
	ctx := context.Background()
	kv, err := bus.QuotasKV(ctx, b.JS, b.Names, 1)
	if err != nil {
		t.Fatal(err)
	}
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
	b := testkit.StartBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := bus.QuotasKV(ctx, b.JS, b.Names, 1)
	if err != nil {
		t.Fatal(err)
	}
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
