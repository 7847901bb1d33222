// Package coalesce runs a function per key for bursts of triggers: at most
// one run of a key at a time, the runs of one key starting at least an
// interval apart, and every trigger that arrives while a run of its key
// waits or runs folded into that key's next run (with the union of their
// items). A flood of triggers therefore costs one run per interval per
// key, never one run per trigger.
//
// mcpbus uses it for upstream list_changed notifications: toolcall
// coalesces them per server before publishing a rediscovery request, and
// discovery per server before rediscovering it.
package coalesce

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Func is one run for key with the items of the triggers it serves
// (sorted, without repeats). ctx ends when the Group is closed.
type Func[K comparable] func(ctx context.Context, key K, items []string)

// Group coalesces triggers per key. Safe for concurrent use; Trigger never
// blocks on a run.
type Group[K comparable] struct {
	interval time.Duration
	fn       Func[K]
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu   sync.Mutex
	keys map[K]*state
}

type state struct {
	items   map[string]bool
	running bool // a run is waiting for its turn or running
	last    time.Time
}

// pruneAbove is how many idle keys a Group keeps before Trigger forgets
// those whose last run is over an interval old.
const pruneAbove = 1024

// New returns a Group running fn with at least interval between the
// starts of two runs of one key.
func New[K comparable](interval time.Duration, fn Func[K]) *Group[K] {
	ctx, cancel := context.WithCancel(context.Background())
	return &Group[K]{interval: interval, fn: fn, ctx: ctx, cancel: cancel, keys: map[K]*state{}}
}

// Trigger asks for a run of key covering items. It reports whether it
// started one; false means it was folded into the run already pending for
// key (or the Group is closed).
func (g *Group[K]) Trigger(key K, items ...string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctx.Err() != nil {
		return false
	}
	st := g.keys[key]
	if st == nil {
		if len(g.keys) >= pruneAbove {
			g.pruneLocked()
		}
		st = &state{items: map[string]bool{}}
		g.keys[key] = st
	}
	for _, it := range items {
		st.items[it] = true
	}
	if st.running {
		return false
	}
	st.running = true
	g.wg.Add(1)
	go g.loop(key, st)
	return true
}

// pruneLocked forgets the idle keys whose last run is over an interval
// old (a trigger for them runs at once anyway).
func (g *Group[K]) pruneLocked() {
	now := time.Now()
	for k, st := range g.keys {
		if !st.running && now.Sub(st.last) >= g.interval {
			delete(g.keys, k)
		}
	}
}

// loop runs key until no trigger is pending.
func (g *Group[K]) loop(key K, st *state) {
	defer g.wg.Done()
	for {
		g.mu.Lock()
		wait := time.Until(st.last.Add(g.interval))
		g.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-g.ctx.Done():
				t.Stop()
				return
			}
		}
		g.mu.Lock()
		items := make([]string, 0, len(st.items))
		for it := range st.items {
			items = append(items, it)
		}
		clear(st.items)
		st.last = time.Now()
		g.mu.Unlock()
		slices.Sort(items)
		if g.ctx.Err() != nil {
			return
		}
		g.fn(g.ctx, key, items)
		g.mu.Lock()
		if len(st.items) == 0 {
			st.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
	}
}

// Close ends the Group: pending runs are dropped, running ones see their
// ctx end, and Close waits for them. Idempotent.
func (g *Group[K]) Close() {
	g.mu.Lock()
	g.cancel()
	g.mu.Unlock()
	g.wg.Wait()
}
