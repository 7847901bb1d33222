// Package flight shares one in-flight computation among the callers that
// want the same thing at the same time (single flight), generic over the
// key and the value.
//
// A call runs in a goroutine of its own, on a context the Group's owner
// gives (its lifetime, never a waiter's): a waiter whose context ends stops
// waiting with an error for which WaitEnded is true, and the call goes on
// for the others. Owners that keep state of their own (a cache, a token)
// store the result from inside the call's function, before any waiter
// wakes, under their own lock; current tells them whether the call is
// still the one registered under its key (no Forget, ForgetAll or Replace
// since), which they check under the same lock as they call those. A Group
// never calls out while it holds its own lock, so an owner may call it
// with its lock held.
//
// Wait joins every call's goroutine (the owner's shutdown).
package flight

import (
	"context"
	"errors"
	"sync"
)

// Func is a call's work. ctx is the Group owner's context for it (ended by
// Call.Cancel); current reports whether the call is still the one
// registered under its key.
type Func[V any] func(ctx context.Context, current func() bool) (V, error)

// Call is one computation in flight. Its result is set once, before Done
// is closed.
type Call[V any] struct {
	done   chan struct{}
	val    V
	err    error
	cancel context.CancelFunc
}

// Done is closed when the call has returned.
func (c *Call[V]) Done() <-chan struct{} { return c.done }

// Result is the call's value and error; only valid once Done is closed.
func (c *Call[V]) Result() (V, error) { return c.val, c.err }

// Cancel ends the call's context (its waiters get what the call then
// returns).
func (c *Call[V]) Cancel() { c.cancel() }

// Wait returns the call's result, or, when ctx ends first, the zero value
// and an error wrapping ctx's for which WaitEnded is true; the call goes
// on.
func (c *Call[V]) Wait(ctx context.Context) (V, error) {
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		var zero V
		return zero, waitEnded{context.Cause(ctx)}
	}
}

// waitEnded is a waiter that stopped waiting.
type waitEnded struct{ cause error }

func (e waitEnded) Error() string { return "stopped waiting: " + e.cause.Error() }
func (e waitEnded) Unwrap() error { return e.cause }

// WaitEnded reports an error of Wait whose context ended first.
func WaitEnded(err error) bool {
	var w waitEnded
	return errors.As(err, &w)
}

// Group holds the calls in flight by key. The zero Group is ready to use;
// it must not be copied after first use. Safe for concurrent use.
type Group[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*Call[V]
	wg    sync.WaitGroup
}

// Start returns the call registered under key, or starts fn as a new one
// under key on ctx; started reports a new call.
func (g *Group[K, V]) Start(ctx context.Context, key K, fn Func[V]) (c *Call[V], started bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.calls[key]; c != nil {
		return c, false
	}
	return g.startLocked(ctx, key, true, fn), true
}

// Replace starts fn as a new call under key on ctx. A call already
// registered under key goes on for its waiters, no longer current.
func (g *Group[K, V]) Replace(ctx context.Context, key K, fn Func[V]) *Call[V] {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.startLocked(ctx, key, true, fn)
}

// Alone starts fn as a call that is never registered (no later Start joins
// it; current is always false).
func (g *Group[K, V]) Alone(ctx context.Context, fn Func[V]) *Call[V] {
	g.mu.Lock()
	defer g.mu.Unlock()
	var zero K
	return g.startLocked(ctx, zero, false, fn)
}

// Current is the call registered under key, or nil.
func (g *Group[K, V]) Current(key K) *Call[V] {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[key]
}

// Forget unregisters the call under key: the next Start starts a new one.
// The call goes on for its waiters, no longer current.
func (g *Group[K, V]) Forget(key K) {
	g.mu.Lock()
	delete(g.calls, key)
	g.mu.Unlock()
}

// ForgetAll unregisters every call.
func (g *Group[K, V]) ForgetAll() {
	g.mu.Lock()
	clear(g.calls)
	g.mu.Unlock()
}

// Wait waits until every call started so far has returned.
func (g *Group[K, V]) Wait() { g.wg.Wait() }

func (g *Group[K, V]) startLocked(ctx context.Context, key K, register bool, fn Func[V]) *Call[V] {
	ctx, cancel := context.WithCancel(ctx)
	c := &Call[V]{done: make(chan struct{}), cancel: cancel}
	if register {
		if g.calls == nil {
			g.calls = map[K]*Call[V]{}
		}
		g.calls[key] = c
	}
	current := func() bool {
		if !register {
			return false
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.calls[key] == c
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer cancel()
		v, err := fn(ctx, current)
		g.mu.Lock()
		if register && g.calls[key] == c {
			delete(g.calls, key)
		}
		c.val, c.err = v, err
		g.mu.Unlock()
		close(c.done)
	}()
	return c
}
