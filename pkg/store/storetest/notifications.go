package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

func claimParams(owner string) store.ClaimParams {
	return store.ClaimParams{Owner: owner, Lease: time.Minute, Limit: 100}
}

func testClaimPollsSkipsCancels(t *testing.T, s store.TaskStore) {
	poll := insert(t, s, newTask("u", "th", "poll"))
	cancel := insert(t, s, newTask("u", "th", "cancel"))
	_, err := s.RequestCancel(t.Context(), store.RequestCancelParams{UserID: "u", ThreadID: "th", TaskID: cancel.ID})
	must(t, "RequestCancel", err)
	later := newTask("u", "th", "later")
	later.NextPollAt = ptr(time.Now().Add(time.Hour))
	insert(t, s, later)
	done := newTask("u", "th", "done")
	done.Status = store.TaskStatusCompleted
	insert(t, s, done)

	got, err := s.ClaimDuePolls(t.Context(), claimParams("p1"))
	must(t, "ClaimDuePolls", err)
	if len(got) != 1 || got[0].ID != poll.ID {
		t.Fatalf("ClaimDuePolls = %v, want only %s", ids(got), poll.ID)
	}
	if got[0].PollAttemptCount != 1 || got[0].CancelAttemptCount != 0 || got[0].LeaseOwner != "p1" || got[0].LeaseExpiresAt == nil {
		t.Fatalf("claimed poll row = %s", render(got[0]))
	}
	again, err := s.ClaimDuePolls(t.Context(), claimParams("p2"))
	must(t, "second ClaimDuePolls", err)
	if len(again) != 0 {
		t.Fatalf("second claim got %v while the lease is live", ids(again))
	}
}

func testClaimCancelsSkipsPolls(t *testing.T, s store.TaskStore) {
	insert(t, s, newTask("u", "th", "poll"))
	c1 := insert(t, s, newTask("u", "th", "c1"))
	c2 := insert(t, s, newTask("u", "th", "c2"))
	var requested []*store.Task
	for _, c := range []*store.Task{c1, c2} {
		r, err := s.RequestCancel(t.Context(), store.RequestCancelParams{UserID: "u", ThreadID: "th", TaskID: c.ID})
		must(t, "RequestCancel", err)
		requested = append(requested, r)
	}
	// Due order is (next_cancel_at, id); two requests in one clock tick
	// (milliseconds on SQLite) are ordered by id.
	first, second := requested[0], requested[1]
	if second.NextCancelAt.Before(*first.NextCancelAt) || (second.NextCancelAt.Equal(*first.NextCancelAt) && second.ID < first.ID) {
		first, second = second, first
	}
	c1, c2 = first, second
	got, err := s.ClaimDueCancels(t.Context(), store.ClaimParams{Owner: "p1", Lease: time.Minute, Limit: 1})
	must(t, "ClaimDueCancels", err)
	if len(got) != 1 || got[0].ID != c1.ID {
		t.Fatalf("ClaimDueCancels limit 1 = %v, want [%s] (oldest request first)", ids(got), c1.ID)
	}
	if got[0].CancelAttemptCount != 1 || got[0].PollAttemptCount != 0 {
		t.Fatalf("claimed cancel row counts: cancel %d poll %d", got[0].CancelAttemptCount, got[0].PollAttemptCount)
	}
	rest, err := s.ClaimDueCancels(t.Context(), claimParams("p2"))
	must(t, "ClaimDueCancels rest", err)
	if len(rest) != 1 || rest[0].ID != c2.ID {
		t.Fatalf("ClaimDueCancels rest = %v, want [%s]", ids(rest), c2.ID)
	}
}

// withEvent returns a task whose outbox has an event to deliver.
func withEvent(task *store.Task, status string, due time.Time) *store.Task {
	task.NotificationStatus = status
	task.EventVersion = 1
	task.EventFingerprint = "fp"
	task.NextNotificationAt = ptr(due)
	return task
}

func testClaimNotificationsEligibility(t *testing.T, s store.TaskStore) {
	past := time.Now().Add(-time.Minute)
	want := map[string]bool{}
	for _, st := range []string{store.NotificationPending, store.NotificationClaimed, store.NotificationRetry} {
		task := insert(t, s, withEvent(newTask("u", "th", "ok-"+st), st, past))
		want[task.ID] = true
	}
	for _, st := range []string{store.NotificationNone, store.NotificationDelivered, store.NotificationDeadLetter, store.NotificationDispatched} {
		insert(t, s, withEvent(newTask("u", "th", "no-"+st), st, past))
	}
	insert(t, s, withEvent(newTask("u", "th", "future"), store.NotificationPending, time.Now().Add(time.Hour)))
	notified := withEvent(newTask("u", "th", "notified"), store.NotificationPending, past)
	notified.NotifiedVersion = 1
	insert(t, s, notified)
	leased := withEvent(newTask("u", "th", "leased"), store.NotificationPending, past)
	leased.NotificationLeaseOwner = "other"
	leased.NotificationLeaseExpiresAt = ptr(time.Now().Add(time.Hour))
	insert(t, s, leased)

	got, err := s.ClaimDueNotifications(t.Context(), claimParams("n1"))
	must(t, "ClaimDueNotifications", err)
	if len(got) != len(want) {
		t.Fatalf("claimed %v, want the %d eligible rows", ids(got), len(want))
	}
	for _, task := range got {
		if !want[task.ID] {
			t.Fatalf("claimed ineligible row %s", render(task))
		}
		if task.NotificationLeaseOwner != "n1" || task.NotificationLeaseExpiresAt == nil {
			t.Fatalf("claimed row without the notification lease: %s", render(task))
		}
		near(t, "notification_lease_expires_at", *task.NotificationLeaseExpiresAt, time.Now().Add(time.Minute), 10*time.Second)
		if task.LeaseOwner != "" || task.PollAttemptCount != 0 {
			t.Fatalf("a notification claim touched the poll lease: %s", render(task))
		}
	}
}

func testClaimNotificationsOrderAndLimit(t *testing.T, s store.TaskStore) {
	base := time.Now().Add(-time.Hour)
	var want []string
	for i := range 5 {
		task := insert(t, s, withEvent(newTask("u", "th", fmt.Sprintf("r%d", i)), store.NotificationPending, base.Add(time.Duration(4-i)*time.Minute)))
		want = append([]string{task.ID}, want...)
	}
	got, err := s.ClaimDueNotifications(t.Context(), store.ClaimParams{Owner: "n", Lease: time.Minute, Limit: 3})
	must(t, "ClaimDueNotifications", err)
	if fmt.Sprint(ids(got)) != fmt.Sprint(want[:3]) {
		t.Fatalf("claimed %v, want %v (by next_notification_at)", ids(got), want[:3])
	}
}

func testClaimNotificationsConcurrent(t *testing.T, s store.TaskStore) {
	const rows, workers = 30, 4
	for i := range rows {
		insert(t, s, withEvent(newTask("u", "th", fmt.Sprintf("r%02d", i)), store.NotificationPending, time.Now().Add(-time.Minute)))
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
		errs = make([]error, workers)
	)
	for w := range workers {
		wg.Go(func() {
			for {
				got, err := s.ClaimDueNotifications(t.Context(), store.ClaimParams{Owner: fmt.Sprint("w", w), Lease: time.Minute, Limit: 2})
				if err != nil || len(got) == 0 {
					errs[w] = err
					return
				}
				mu.Lock()
				for _, task := range got {
					seen[task.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		must(t, "claim", err)
	}
	if len(seen) != rows {
		t.Fatalf("claimed %d distinct rows, want %d", len(seen), rows)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("row %s claimed %d times under live leases", id, n)
		}
	}
}

func testNotificationLeaseExpiry(t *testing.T, s store.TaskStore) {
	task := insert(t, s, withEvent(newTask("u", "th", "r"), store.NotificationPending, time.Now().Add(-time.Minute)))
	got, err := s.ClaimDueNotifications(t.Context(), store.ClaimParams{Owner: "crashed", Lease: time.Second, Limit: 1, Now: ago(time.Minute / 2)})
	must(t, "claim with expired lease", err)
	if len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	err = updateNotification(t.Context(), s, task.ID, "crashed", func(t *store.Task) { t.NotificationStatus = store.NotificationDelivered })
	wantErr(t, "update under an expired notification lease", err, store.ErrLeaseLost)
	got, err = s.ClaimDueNotifications(t.Context(), claimParams("rescuer"))
	must(t, "reclaim", err)
	if len(got) != 1 || got[0].NotificationLeaseOwner != "rescuer" {
		t.Fatalf("reclaim after expiry = %v", ids(got))
	}
}

func testUpdateNotificationUnderLease(t *testing.T, s store.TaskStore) {
	task := insert(t, s, withEvent(newTask("u", "th", "r"), store.NotificationPending, time.Now().Add(-time.Minute)))
	_, err := s.ClaimDueNotifications(t.Context(), claimParams("n1"))
	must(t, "claim", err)
	err = updateNotification(t.Context(), s, task.ID, "other", func(*store.Task) {})
	wantErr(t, "update by a non-owner", err, store.ErrLeaseLost)
	err = updateNotification(t.Context(), s, "mcp-task-missing", "n1", func(*store.Task) {})
	wantErr(t, "update of a missing row", err, store.ErrLeaseLost)
	err = updateNotification(t.Context(), s, task.ID, "", func(*store.Task) {})
	wantErr(t, "update without owner", err, store.ErrInvalid)

	event := json.RawMessage(`{"task_id":"x","status":"completed"}`)
	must(t, "update", updateNotification(t.Context(), s, task.ID, "n1", func(t *store.Task) {
		t.NotificationStatus = store.NotificationDelivered
		t.NotifiedVersion = 1
		t.DispatchVersion = 1
		t.DispatchAttempt = 2
		t.DispatchEvent = event
		t.NotificationError = "boom"
		t.NotificationAttemptCount = 2
		t.NextNotificationAt = nil
		t.NotificationLeaseOwner = ""
		t.NotificationLeaseExpiresAt = nil
		// Columns outside the outbox are not written.
		t.Status = store.TaskStatusFailed
		t.LastPollError = "ignored"
	}))
	got := get(t, s, task.ID)
	if got.NotificationStatus != store.NotificationDelivered || got.NotifiedVersion != 1 || got.DispatchVersion != 1 ||
		got.DispatchAttempt != 2 || !sameJSON(t, got.DispatchEvent, event) || got.NotificationError != "boom" ||
		got.NotificationAttemptCount != 2 || got.NextNotificationAt != nil || got.NotificationLeaseOwner != "" ||
		got.NotificationLeaseExpiresAt != nil {
		t.Fatalf("outbox columns not stored: %s", render(got))
	}
	if got.Status != store.TaskStatusSubmitted || got.LastPollError != "" {
		t.Fatalf("a notification update wrote other columns: %s", render(got))
	}
	err = updateNotification(t.Context(), s, task.ID, "n1", func(*store.Task) {})
	wantErr(t, "update after releasing the lease", err, store.ErrLeaseLost)
}

func testNotificationAndPollLeasesIndependent(t *testing.T, s store.TaskStore) {
	task := insert(t, s, withEvent(newTask("u", "th", "r"), store.NotificationPending, time.Now().Add(-time.Minute)))
	polls, err := s.ClaimDuePolls(t.Context(), claimParams("poller"))
	must(t, "ClaimDuePolls", err)
	notes, err := s.ClaimDueNotifications(t.Context(), claimParams("publisher"))
	must(t, "ClaimDueNotifications", err)
	if len(polls) != 1 || len(notes) != 1 {
		t.Fatalf("claims: %d polls, %d notifications; want one each", len(polls), len(notes))
	}
	// The poll writes an event while the publisher holds the outbox lease.
	must(t, "poll update", update(t.Context(), s, task.ID, "poller", func(t *store.Task) {
		t.Status = store.TaskStatusCompleted
		t.EventVersion = 2
		t.LeaseOwner, t.LeaseExpiresAt = "", nil
	}))
	must(t, "notification update", updateNotification(t.Context(), s, task.ID, "publisher", func(t *store.Task) {
		if t.EventVersion != 2 {
			panic(errors.New("the notification update did not read the poll's write"))
		}
		t.NotifiedVersion = 1
		t.NotificationStatus = store.NotificationPending
		t.NotificationLeaseOwner, t.NotificationLeaseExpiresAt = "", nil
	}))
	got := get(t, s, task.ID)
	if got.Status != store.TaskStatusCompleted || got.EventVersion != 2 || got.NotifiedVersion != 1 {
		t.Fatalf("one write lost the other's: %s", render(got))
	}
}
