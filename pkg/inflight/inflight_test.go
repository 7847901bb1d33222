package inflight_test

import (
	"testing"

	"github.com/mcpbus/mcpbus/pkg/inflight"
)

// A key at its cap is refused, another key is not, and a release frees a
// slot (twice releasing frees one).
func TestLimiter(t *testing.T) {
	t.Parallel()
	l := inflight.New(2)
	r1, ok1 := l.Acquire("alice")
	_, ok2 := l.Acquire("alice")
	if !ok1 || !ok2 {
		t.Fatal("the first two calls were refused")
	}
	if _, ok := l.Acquire("alice"); ok {
		t.Fatal("a third call in flight was admitted")
	}
	if _, ok := l.Acquire("bob"); !ok {
		t.Fatal("bob was refused because of alice")
	}
	r1()
	r1()
	if n := l.InFlight("alice"); n != 1 {
		t.Fatalf("in flight after one release (twice) = %d, want 1", n)
	}
	if _, ok := l.Acquire("alice"); !ok {
		t.Fatal("the freed slot was not reusable")
	}
	if _, ok := l.Acquire("alice"); ok {
		t.Fatal("a third call in flight was admitted after the release")
	}
}

// TryAcquire counts like Acquire, refuses past the cap, and Release gives
// one slot back, allocating nothing (not parallel: AllocsPerRun).
func TestTryAcquireRelease(t *testing.T) {
	l := inflight.New(1)
	if !l.TryAcquire("alice") {
		t.Fatal("the first call was refused")
	}
	if l.TryAcquire("alice") {
		t.Fatal("a second call in flight was admitted")
	}
	if !l.TryAcquire("bob") {
		t.Fatal("bob was refused because of alice")
	}
	l.Release("alice")
	if n := l.InFlight("alice"); n != 0 {
		t.Fatalf("in flight after the release = %d, want 0", n)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if l.TryAcquire("alice") {
			l.Release("alice")
		}
	}); allocs != 0 {
		t.Fatalf("TryAcquire+Release allocate %v times, want 0", allocs)
	}
}
