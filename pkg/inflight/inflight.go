// Package inflight caps the calls in flight per key (a user, an upstream
// server): Acquire counts a call under its key, or refuses it when the key
// already has its maximum in flight; the release gives the slot back.
// Nothing waits: a refused call is answered at once (rate_limited), so a
// flood holds no goroutine, descriptor or memory beyond the cap.
//
// The counts are this process's: with several replicas each one enforces
// the cap on its own share of the calls.
package inflight

import "sync"

// Limiter counts calls in flight per key. Its zero value is not usable;
// build one with New. A Limiter is safe for concurrent use.
type Limiter struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

// New returns a Limiter allowing limit calls in flight per key (limit < 1
// counts as 1).
func New(limit int) *Limiter {
	return &Limiter{max: max(limit, 1), n: map[string]int{}}
}

// Max is the limiter's cap per key.
func (l *Limiter) Max() int { return l.max }

// Acquire counts one more call under key and returns its release (safe to
// call more than once), or ok false, counting nothing, when key already
// has Max calls in flight.
func (l *Limiter) Acquire(key string) (release func(), ok bool) {
	if !l.TryAcquire(key) {
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(func() { l.Release(key) }) }, true
}

// TryAcquire is Acquire without the release function (nothing allocated):
// it counts one more call under key, or reports false, counting nothing,
// when key already has Max calls in flight. Each true must be followed by
// exactly one Release(key).
func (l *Limiter) TryAcquire(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] >= l.max {
		return false
	}
	l.n[key]++
	return true
}

// Release gives back one call counted under key by TryAcquire.
func (l *Limiter) Release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key]--; l.n[key] <= 0 {
		delete(l.n, key) // no entry per key ever seen
	}
}

// InFlight is the number of calls in flight under key.
func (l *Limiter) InFlight(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[key]
}
