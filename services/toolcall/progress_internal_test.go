package toolcall

import (
	"context"
	"fmt"
	"testing"
)

// A cancel names a call and its user: another user's cancel does nothing,
// the user's ends it, and a cancel that arrives before its call registers
// (a hand-over on its way) ends the call as it starts, for that user only.
func TestCallRegistryCancelsOnlyTheCallersCall(t *testing.T) {
	var r callRegistry
	ctx, untrack := r.track(context.Background(), "id-1", "alice")
	defer untrack()
	if n := r.cancel("id-1", "mallory"); n != 0 || ctx.Err() != nil {
		t.Fatalf("another user's cancel: %d calls, ctx %v", n, ctx.Err())
	}
	if n := r.cancel("id-1", "alice"); n != 1 || !callerCancelled(ctx) {
		t.Fatalf("the caller's cancel: %d calls, cause %v", n, context.Cause(ctx))
	}

	r.cancel("id-2", "mallory")
	early, untrackEarly := r.track(context.Background(), "id-2", "alice")
	defer untrackEarly()
	if early.Err() != nil {
		t.Fatal("another user's earlier cancel ended the call")
	}
	r.cancel("id-3", "alice")
	late, untrackLate := r.track(context.Background(), "id-3", "alice")
	defer untrackLate()
	if !callerCancelled(late) {
		t.Fatal("a cancel that arrived first did not end the call")
	}
}

// One user's cancels of calls that do not run (an agent worker may publish
// any number on its own subject) evict only that user's tombstones: a
// cancel of another user that arrived before its call registers still
// ends that call.
func TestCancelFloodEvictsOnlyTheFloodersTombstones(t *testing.T) {
	var r callRegistry
	r.cancel("early", "alice")
	for i := range 2 * maxTombstones {
		r.cancel(fmt.Sprint("flood-", i), "mallory")
	}
	if n := r.buried["mallory"]; n > maxTombstonesPerUser {
		t.Errorf("mallory has %d tombstones, more than %d", n, maxTombstonesPerUser)
	}
	ctx, untrack := r.track(context.Background(), "early", "alice")
	defer untrack()
	if !callerCancelled(ctx) {
		t.Fatal("another user's flood of cancels evicted alice's early cancel")
	}
	// The flooder's latest tombstone still works for the flooder.
	last, untrackLast := r.track(context.Background(), fmt.Sprint("flood-", 2*maxTombstones-1), "mallory")
	defer untrackLast()
	if !callerCancelled(last) {
		t.Fatal("the flooder's latest cancel was lost")
	}
}
