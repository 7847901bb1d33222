package toolcall

import (
	"slices"
	"testing"
	"time"
)

// TestSubRegistry: one entry per (connection, raw URI); a subscriber is a
// user's id, so another user naming the same id neither ends it nor is
// counted as it; the last subscriber to leave (or expire) removes the entry.
func TestSubRegistry(t *testing.T) {
	t.Parallel()
	r := newSubRegistry()
	k := subKey{conn: "c", raw: "demo://greeting"}
	now := time.Unix(1000, 0)
	e := r.entry(k, "fed")
	if r.put(k, e, subscriberKey{"alice", "s1"}, "t1", now.Add(time.Minute)) {
		t.Fatal("alice's first subscribe counted as a refresh")
	}
	r.put(k, r.entry(k, "fed"), subscriberKey{"bob", "s2"}, "t2", now.Add(2*time.Minute))
	if !r.put(k, e, subscriberKey{"alice", "s1"}, "t1", now.Add(time.Minute)) {
		t.Fatal("alice's second subscribe is not a refresh")
	}
	if r.entry(k, "fed") != e {
		t.Fatal("a second subscriber got its own entry")
	}
	if c := r.remove(k, subscriberKey{"mallory", "s1"}); c != nil || len(e.subscribers) != 2 {
		t.Fatalf("mallory naming alice's id removed it: %d subscribers left", len(e.subscribers))
	}
	server, byUser := r.subscribersOf(k)
	if server != "fed" || !slices.Equal(byUser["alice"], []string{"s1"}) || !slices.Equal(byUser["bob"], []string{"s2"}) || len(byUser) != 2 {
		t.Fatalf("subscribersOf = %q %v", server, byUser)
	}
	if gone, expired := r.expire(now.Add(90 * time.Second)); len(gone) != 0 || len(expired) != 1 || expired[0].sub.user != "alice" || expired[0].thread != "t1" {
		t.Fatalf("expired entries with bob still subscribed: %v, or not alice alone expired: %+v", gone, expired)
	}
	if _, byUser := r.subscribersOf(k); len(byUser) != 1 || byUser["bob"] == nil {
		t.Fatalf("after alice expired: %v", byUser)
	}
	if gone, _ := r.expire(now.Add(3 * time.Minute)); len(gone) != 1 || gone[k] != e {
		t.Fatalf("the last subscriber expired but the entry stayed: %v", gone)
	}
	if _, byUser := r.subscribersOf(k); byUser != nil {
		t.Fatalf("entry still there: %v", byUser)
	}
}
