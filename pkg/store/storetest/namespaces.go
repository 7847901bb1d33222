package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// testNamespacesDoNotMeet: two deployments (nats.namespace "a" and "b")
// on one database each claim, list and count only their own tasks.
func testNamespacesDoNotMeet(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	mine := map[string]*store.Task{}
	for _, ns := range []string{"a", "b"} {
		task := newTask("u1", "th", "remote-"+ns)
		task.Namespace = ns
		task.NotificationStatus = store.NotificationPending
		task.NextNotificationAt = ago(time.Minute)
		task.EventVersion = 1
		mine[ns] = insert(t, s, task)
		if mine[ns].Namespace != ns {
			t.Fatalf("inserted task has namespace %q, want %q", mine[ns].Namespace, ns)
		}
	}
	for _, ns := range []string{"a", "b"} {
		want := []string{mine[ns].ID}
		claim := store.ClaimParams{Namespace: ns, Owner: "poller-" + ns, Lease: time.Minute, Limit: 10}
		polls, err := s.ClaimDuePolls(ctx, claim)
		must(t, "ClaimDuePolls", err)
		if !slices.Equal(ids(polls), want) {
			t.Errorf("namespace %s claimed polls %v, want %v", ns, ids(polls), want)
		}
		notes, err := s.ClaimDueNotifications(ctx, claim)
		must(t, "ClaimDueNotifications", err)
		if !slices.Equal(ids(notes), want) {
			t.Errorf("namespace %s claimed notifications %v, want %v", ns, ids(notes), want)
		}
		listed, err := s.ListTasks(ctx, store.ListTasksParams{Namespace: ns, UserID: "u1"})
		must(t, "ListTasks", err)
		if !slices.Equal(ids(listed), want) {
			t.Errorf("namespace %s listed %v, want %v", ns, ids(listed), want)
		}
		counts, err := s.CountTasksByStatus(ctx, store.CountTasksByStatusParams{Namespace: ns})
		must(t, "CountTasksByStatus", err)
		if total := counts[mine[ns].Status]; total != 1 || len(counts) != 1 {
			t.Errorf("namespace %s counts %v, want one %s task", ns, counts, mine[ns].Status)
		}
		pending, err := s.CountPendingNotifications(ctx, store.CountPendingNotificationsParams{Namespace: ns})
		must(t, "CountPendingNotifications", err)
		if pending != 1 {
			t.Errorf("namespace %s has %d pending notifications, want 1", ns, pending)
		}
	}
	// A cancel from the other deployment finds nothing.
	if _, err := s.RequestCancel(ctx, store.RequestCancelParams{Namespace: "b", UserID: "u1", ThreadID: "th", TaskID: mine["a"].ID}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("namespace b cancelled a's task: %v", err)
	}
	if got := get(t, s, mine["a"].ID); got.CancelRequestedAt != nil {
		t.Errorf("a's task has a cancel request from b")
	}
	// The deployment without a namespace sees neither.
	none, err := s.ClaimDuePolls(ctx, store.ClaimParams{Owner: "plain", Lease: time.Minute, Limit: 10, Now: ptr(time.Now().Add(time.Hour))})
	must(t, "ClaimDuePolls", err)
	if len(none) != 0 {
		t.Errorf("the deployment without a namespace claimed %v", ids(none))
	}
}
