package flight_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/flight"
)

// TestStartSharesOneCall: concurrent callers of one key share one run and
// its result; another key runs on its own.
func TestStartSharesOneCall(t *testing.T) {
	t.Parallel()
	var g flight.Group[string, int]
	var runs atomic.Int64
	gate := make(chan struct{})
	fn := func(context.Context, func() bool) (int, error) {
		runs.Add(1)
		<-gate
		return 42, nil
	}
	first, started := g.Start(context.Background(), "a", fn)
	if !started {
		t.Fatal("the first Start did not start a call")
	}
	var wg sync.WaitGroup
	results := make([]int, 8)
	for i := range results {
		c, started := g.Start(context.Background(), "a", fn)
		if started || c != first {
			t.Fatalf("Start %d started a second call", i)
		}
		wg.Go(func() { results[i], _ = c.Wait(context.Background()) })
	}
	other, started := g.Start(context.Background(), "b", fn)
	if !started || other == first {
		t.Fatal("another key joined the first call")
	}
	close(gate)
	wg.Wait()
	for i, v := range results {
		if v != 42 {
			t.Errorf("waiter %d got %d, want 42", i, v)
		}
	}
	<-other.Done()
	g.Wait()
	if n := runs.Load(); n != 2 {
		t.Errorf("runs = %d, want 2 (one per key)", n)
	}
	if g.Current("a") != nil {
		t.Error("a finished call is still registered")
	}
}

// TestWaiterThatGivesUpLeavesTheCallRunning: a waiter whose context ends
// gets an error WaitEnded recognises, wrapping its context's; the call
// goes on (its context is the owner's) and the others get the result.
func TestWaiterThatGivesUpLeavesTheCallRunning(t *testing.T) {
	t.Parallel()
	var g flight.Group[string, string]
	gate := make(chan struct{})
	var callCtxErr atomic.Value
	c, _ := g.Start(context.Background(), "k", func(ctx context.Context, _ func() bool) (string, error) {
		<-gate
		callCtxErr.Store(ctx.Err() == nil)
		return "done", nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Wait(ctx); !flight.WaitEnded(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a wait that ended with context.Canceled", err)
	}
	close(gate)
	if v, err := c.Wait(context.Background()); v != "done" || err != nil || flight.WaitEnded(err) {
		t.Fatalf("the other waiter got %q, %v", v, err)
	}
	if ok, _ := callCtxErr.Load().(bool); !ok {
		t.Error("the call's context ended with the waiter's")
	}
	if flight.WaitEnded(errors.New("the call's own error")) {
		t.Error("WaitEnded is true for a call's own error")
	}
}

// TestForgetAndReplace: after Forget or Replace the old call is no longer
// current (and not joined); Alone is never registered; Cancel ends the
// call's context.
func TestForgetAndReplace(t *testing.T) {
	t.Parallel()
	var g flight.Group[int, bool]
	gate := make(chan struct{})
	// Each call reports whether it was still current when it finished.
	fn := func(_ context.Context, current func() bool) (bool, error) {
		<-gate
		return current(), nil
	}
	old, _ := g.Start(context.Background(), 1, fn)
	g.Forget(1)
	fresh, started := g.Start(context.Background(), 1, fn)
	if !started || fresh == old {
		t.Fatal("Start after Forget joined the forgotten call")
	}
	replaced := g.Replace(context.Background(), 1, fn)
	if g.Current(1) != replaced {
		t.Fatal("Replace did not register the new call")
	}
	alone := g.Alone(context.Background(), fn)
	if g.Current(1) != replaced {
		t.Fatal("Alone replaced the registered call")
	}
	var other flight.Group[int, bool]
	g2, _ := other.Start(context.Background(), 2, fn)
	other.ForgetAll()
	close(gate)
	for name, want := range map[string]struct {
		c    *flight.Call[bool]
		want bool
	}{"forgotten": {old, false}, "replaced": {fresh, false}, "replacement": {replaced, true}, "alone": {alone, false}, "forgotten by ForgetAll": {g2, false}} {
		if got, _ := want.c.Wait(context.Background()); got != want.want {
			t.Errorf("%s call: current = %v, want %v", name, got, want.want)
		}
	}

	cancelled, _ := g.Start(context.Background(), 3, func(ctx context.Context, _ func() bool) (bool, error) {
		<-ctx.Done()
		return false, ctx.Err()
	})
	cancelled.Cancel()
	if _, err := cancelled.Wait(context.Background()); !errors.Is(err, context.Canceled) || flight.WaitEnded(err) {
		t.Errorf("cancelled call: err = %v, want its own context.Canceled", err)
	}
	g.Wait()
}
