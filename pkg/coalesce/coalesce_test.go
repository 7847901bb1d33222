package coalesce_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/coalesce"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// Triggers arriving while a key's run runs are folded into one more run
// with the union of their items; another key runs on its own; Close waits
// for the run in progress and drops what is pending.
func TestTriggersFoldIntoOneMoreRun(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var runs [][]string
	started, release := make(chan string, 16), make(chan struct{})
	g := coalesce.New(time.Millisecond, func(ctx context.Context, key string, items []string) {
		mu.Lock()
		runs = append(runs, append([]string{key}, items...))
		mu.Unlock()
		started <- key
		if key == "a" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	})
	if !g.Trigger("a", "tools") {
		t.Fatal("the first trigger did not start a run")
	}
	testkit.Receive(t, 10*time.Second, "a's first run", started)
	for _, it := range []string{"prompts", "tools", "resources", "prompts"} {
		if g.Trigger("a", it) {
			t.Fatalf("a trigger during a's run started another run")
		}
	}
	if !g.Trigger("b", "tools") {
		t.Fatal("b did not run on its own")
	}
	testkit.Receive(t, 10*time.Second, "b's run", started)
	release <- struct{}{}
	testkit.Receive(t, 10*time.Second, "a's second run", started)
	mu.Lock()
	got := slices.Clone(runs)
	mu.Unlock()
	want := [][]string{{"a", "tools"}, {"b", "tools"}, {"a", "prompts", "resources", "tools"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("runs = %q, want %q", got, want)
	}
	g.Trigger("a", "tools") // pending while a's second run holds
	g.Close()
	if g.Trigger("a", "tools") {
		t.Error("a trigger after Close started a run")
	}
}

// Runs of one key start at least the interval apart.
func TestRunsOfOneKeyAreSpaced(t *testing.T) {
	t.Parallel()
	const interval = 50 * time.Millisecond
	starts := make(chan time.Time, 4)
	g := coalesce.New(interval, func(context.Context, string, []string) { starts <- time.Now() })
	defer g.Close()
	g.Trigger("k")
	first := testkit.Receive(t, 10*time.Second, "the first run", starts)
	g.Trigger("k")
	second := testkit.Receive(t, 10*time.Second, "the second run", starts)
	if gap := second.Sub(first); gap < interval {
		t.Errorf("runs %v apart, want at least %v", gap, interval)
	}
}
