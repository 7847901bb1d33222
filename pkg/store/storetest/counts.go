package storetest

import (
	"maps"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

func testCountTasksByStatus(t *testing.T, s store.TaskStore) {
	got, err := s.CountTasksByStatus(t.Context(), store.CountTasksByStatusParams{})
	must(t, "CountTasksByStatus of an empty table", err)
	if len(got) != 0 {
		t.Fatalf("CountTasksByStatus of an empty table = %v, want {}", got)
	}
	for i, st := range []string{store.TaskStatusWorking, store.TaskStatusWorking, store.TaskStatusCompleted, store.TaskStatusSubmitted} {
		task := newTask("u", "th", "count-"+string(rune('a'+i)))
		task.Status = st
		insert(t, s, task)
	}
	got, err = s.CountTasksByStatus(t.Context(), store.CountTasksByStatusParams{})
	must(t, "CountTasksByStatus", err)
	want := map[string]int{store.TaskStatusWorking: 2, store.TaskStatusCompleted: 1, store.TaskStatusSubmitted: 1}
	if !maps.Equal(got, want) {
		t.Fatalf("CountTasksByStatus = %v, want %v", got, want)
	}
}

func testCountPendingNotifications(t *testing.T, s store.TaskStore) {
	count := func() int {
		t.Helper()
		n, err := s.CountPendingNotifications(t.Context(), store.CountPendingNotificationsParams{})
		must(t, "CountPendingNotifications", err)
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("CountPendingNotifications of an empty table = %d, want 0", n)
	}
	past, future := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	// Counted: every undelivered event, due or backing off, leased or not.
	for _, st := range []string{store.NotificationPending, store.NotificationClaimed, store.NotificationRetry} {
		insert(t, s, withEvent(newTask("u", "th", "ok-"+st), st, past))
	}
	insert(t, s, withEvent(newTask("u", "th", "future"), store.NotificationRetry, future))
	leased := withEvent(newTask("u", "th", "leased"), store.NotificationPending, past)
	leased.NotificationLeaseOwner = "other"
	leased.NotificationLeaseExpiresAt = ptr(future)
	insert(t, s, leased)
	// Not counted: nothing to deliver, delivered, given up, or already acked.
	for _, st := range []string{store.NotificationNone, store.NotificationDelivered, store.NotificationDeadLetter, store.NotificationDispatched} {
		insert(t, s, withEvent(newTask("u", "th", "no-"+st), st, past))
	}
	notified := withEvent(newTask("u", "th", "notified"), store.NotificationPending, past)
	notified.NotifiedVersion = 1
	insert(t, s, notified)
	if n := count(); n != 5 {
		t.Fatalf("CountPendingNotifications = %d, want 5", n)
	}
}
