package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// ExerciseTasks checks every TaskStore method.
func ExerciseTasks(t *testing.T, newStore NewStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.TaskStore)
	}{
		{"InsertGet", testInsertGet},
		{"InsertConflict", testInsertConflict},
		{"InsertInvalid", testInsertInvalid},
		{"List", testList},
		{"ClaimDue", testClaimDue},
		{"ClaimLimitAndOrder", testClaimLimitAndOrder},
		{"ClaimPollsConcurrent", testClaimPollsConcurrent},
		{"ClaimCancelsConcurrent", testClaimCancelsConcurrent},
		{"ClaimInvalid", testClaimInvalid},
		{"Now", testTaskNow},
		{"LeaseExpiry", testLeaseExpiry},
		{"UpdateUnderLease", testUpdateUnderLease},
		{"RequestCancel", testRequestCancel},
		{"RequestCancelFencesPoll", testRequestCancelFencesPoll},
		{"ClaimPollsSkipsCancels", testClaimPollsSkipsCancels},
		{"ClaimCancelsSkipsPolls", testClaimCancelsSkipsPolls},
		{"ClaimNotificationsEligibility", testClaimNotificationsEligibility},
		{"ClaimNotificationsOrderAndLimit", testClaimNotificationsOrderAndLimit},
		{"ClaimNotificationsConcurrent", testClaimNotificationsConcurrent},
		{"NotificationLeaseExpiry", testNotificationLeaseExpiry},
		{"UpdateNotificationUnderLease", testUpdateNotificationUnderLease},
		{"NotificationAndPollLeasesAreIndependent", testNotificationAndPollLeasesIndependent},
		{"CountTasksByStatus", testCountTasksByStatus},
		{"CountPendingNotifications", testCountPendingNotifications},
		{"NamespacesDoNotMeet", testNamespacesDoNotMeet},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t).Tasks())
		})
	}
}

// newTask returns a valid task for user/thread with a unique remote id, due
// for polling an hour ago.
func newTask(user, thread, remoteID string) *store.Task {
	return &store.Task{
		UserID:       user,
		ThreadID:     thread,
		ServerName:   "jobs",
		DriverName:   "structured",
		RemoteTaskID: remoteID,
		TaskName:     "task " + remoteID,
		DriverData:   json.RawMessage(`{"submit":"submit_job","status":"job_status","cancel":"cancel_job"}`),
		NextPollAt:   ptr(time.Now().Add(-time.Hour)),
	}
}

func insert(t *testing.T, s store.TaskStore, task *store.Task) *store.Task {
	t.Helper()
	must(t, "InsertTask "+task.RemoteTaskID, tryInsert(t.Context(), s, task))
	return task
}

// tryInsert inserts task and copies the stored row back into it.
func tryInsert(ctx context.Context, s store.TaskStore, task *store.Task) error {
	got, err := s.InsertTask(ctx, store.InsertTaskParams{Task: *task})
	if err == nil {
		*task = *got
	}
	return err
}

// update and updateNotification write under a lease at the database clock.
func update(ctx context.Context, s store.TaskStore, id, owner string, fn func(*store.Task)) error {
	return s.UpdateTaskUnderLease(ctx, store.UpdateUnderLeaseParams{ID: id, Owner: owner, Update: fn})
}

func updateNotification(ctx context.Context, s store.TaskStore, id, owner string, fn func(*store.Task)) error {
	return s.UpdateNotificationUnderLease(ctx, store.UpdateUnderLeaseParams{ID: id, Owner: owner, Update: fn})
}

func get(t *testing.T, s store.TaskStore, id string) *store.Task {
	t.Helper()
	got, err := s.GetTask(t.Context(), store.GetTaskParams{ID: id})
	must(t, "GetTask "+id, err)
	return got
}

// canonicalTask renders a task with its JSON fields canonicalised.
func canonicalTask(t *testing.T, task store.Task) string {
	t.Helper()
	for _, p := range []*json.RawMessage{&task.Result, &task.ResultArtifact, &task.InputRequired,
		&task.DriverData, &task.DispatchEvent} {
		*p = canonicalJSON(t, *p)
	}
	return render(task)
}

func sameTask(t *testing.T, what string, got, want store.Task) {
	t.Helper()
	if g, w := canonicalTask(t, got), canonicalTask(t, want); g != w {
		t.Fatalf("%s:\ngot  %s\nwant %s", what, g, w)
	}
}

func ids(tasks []store.Task) []string {
	out := make([]string, len(tasks))
	for i, task := range tasks {
		out[i] = task.ID
	}
	return out
}

func testInsertGet(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	now := time.Now()

	// Defaults: generated id, statuses, database clock for created_at.
	minimal := insert(t, s, newTask("u1", "th1", "r-min"))
	if !strings.HasPrefix(minimal.ID, store.TaskIDPrefix) || len(minimal.ID) != len(store.TaskIDPrefix)+32 {
		t.Errorf("generated id %q, want %s + 32 hex", minimal.ID, store.TaskIDPrefix)
	}
	if minimal.Status != store.TaskStatusSubmitted || minimal.NotificationStatus != store.NotificationNone {
		t.Errorf("defaults: status %q, notification %q", minimal.Status, minimal.NotificationStatus)
	}
	near(t, "created_at", minimal.CreatedAt, now, time.Minute)
	near(t, "updated_at", minimal.UpdatedAt, now, time.Minute)
	sameTask(t, "GetTask of minimal", *get(t, s, minimal.ID), *minimal)

	// Every column round-trips.
	full := &store.Task{
		ID:                         store.NewTaskID(),
		UserID:                     "u1",
		ThreadID:                   "th1",
		RunID:                      "run-1",
		ToolCallID:                 "call-1",
		ServerName:                 strings.Repeat("s", store.MaxServerNameLen),
		DriverName:                 "structured",
		RemoteTaskID:               strings.Repeat("r", store.MaxRemoteTaskIDLen),
		TaskName:                   strings.Repeat("é", store.MaxTaskNameLen),
		Status:                     store.TaskStatusInputRequired,
		Result:                     json.RawMessage(`{"b": [1, 2.5, "x"], "a": null}`),
		ResultPreview:              "preview",
		ResultTruncated:            true,
		ResultArtifact:             json.RawMessage(`{"uri":"file:///a","mime_type":"text/plain"}`),
		Error:                      "boom",
		InputRequired:              json.RawMessage(`{"question":"which?"}`),
		DriverData:                 json.RawMessage(`{"submit":"s","status":"t","cancel":"c"}`),
		NotificationStatus:         store.NotificationRetry,
		EventFingerprint:           strings.Repeat("f", 64),
		EventVersion:               3,
		NotifiedVersion:            1,
		DispatchVersion:            2,
		DispatchAttempt:            4,
		DispatchEvent:              json.RawMessage(`{"task_id":"x","status":"input_required"}`),
		NotificationError:          "busy",
		NotificationAttemptCount:   5,
		NextNotificationAt:         ptr(now.Add(time.Minute)),
		NotificationLeaseOwner:     "notifier",
		NotificationLeaseExpiresAt: ptr(now.Add(2 * time.Minute)),
		NextPollAt:                 ptr(now.Add(3 * time.Minute)),
		LastPolledAt:               ptr(now.Add(-time.Minute)),
		LastPollError:              "timeout",
		PollAttemptCount:           7,
		ConsecutivePollErrorCount:  2,
		LeaseOwner:                 "poller",
		LeaseExpiresAt:             ptr(now.Add(4 * time.Minute)),
		CancelRequestedAt:          ptr(now.Add(-2 * time.Minute)),
		CancelAttemptCount:         1,
		NextCancelAt:               ptr(now.Add(5 * time.Minute)),
		LastCancelError:            "nope",
		CompletedAt:                ptr(now.Add(-3 * time.Minute)),
		CreatedAt:                  ms(now.Add(-time.Hour)),
	}
	want := *full
	insert(t, s, full)
	want.UpdatedAt = full.UpdatedAt
	near(t, "updated_at", full.UpdatedAt, now, time.Minute)
	sameTask(t, "InsertTask result", *full, want)
	sameTask(t, "GetTask of full", *get(t, s, full.ID), want)

	_, err := s.GetTask(ctx, store.GetTaskParams{ID: store.NewTaskID()})
	wantErr(t, "GetTask of a missing id", err, store.ErrNotFound)
}

func testInsertConflict(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	first := insert(t, s, newTask("u1", "th1", "remote-1"))

	dup := newTask("u1", "th2", "remote-1")
	wantErr(t, "same user, server and remote id", tryInsert(ctx, s, dup), store.ErrConflict)

	otherUser := newTask("u2", "th1", "remote-1")
	must(t, "another user with the same remote id", tryInsert(ctx, s, otherUser))

	otherServer := newTask("u1", "th1", "remote-1")
	otherServer.ServerName = "other"
	must(t, "another server with the same remote id", tryInsert(ctx, s, otherServer))

	sameID := newTask("u3", "th1", "remote-3")
	sameID.ID = first.ID
	wantErr(t, "duplicate id", tryInsert(ctx, s, sameID), store.ErrConflict)

	list, err := s.ListTasks(ctx, store.ListTasksParams{UserID: "u1"})
	must(t, "ListTasks", err)
	if len(list) != 2 {
		t.Fatalf("u1 has %d tasks after the conflicts, want 2", len(list))
	}
}

func testInsertInvalid(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	for name, mutate := range map[string]func(*store.Task){
		"no user":             func(task *store.Task) { task.UserID = "" },
		"no thread":           func(task *store.Task) { task.ThreadID = "" },
		"no remote id":        func(task *store.Task) { task.RemoteTaskID = "" },
		"long server name":    func(task *store.Task) { task.ServerName = strings.Repeat("s", store.MaxServerNameLen+1) },
		"long task name":      func(task *store.Task) { task.TaskName = strings.Repeat("é", store.MaxTaskNameLen+1) },
		"unknown status":      func(task *store.Task) { task.Status = "running" },
		"bad result JSON":     func(task *store.Task) { task.Result = json.RawMessage(`{`) },
		"unknown notif state": func(task *store.Task) { task.NotificationStatus = "sent" },
	} {
		task := newTask("u1", "th1", "r-"+name)
		mutate(task)
		wantErr(t, name, tryInsert(ctx, s, task), store.ErrInvalid)
	}
	_, err := s.ListTasks(ctx, store.ListTasksParams{})
	wantErr(t, "ListTasks without a user", err, store.ErrInvalid)
}

func testList(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	base := ms(time.Now().Add(-time.Hour))
	var want []string // newest first
	for i := range 5 {
		task := newTask("u1", "thA", fmt.Sprintf("r%d", i))
		task.CreatedAt = base.Add(time.Duration(i) * time.Second)
		insert(t, s, task)
		want = append([]string{task.ID}, want...)
	}
	// Two tasks created at the same instant, newer than the rest: id DESC.
	tieA, tieB := newTask("u1", "thA", "tie-a"), newTask("u1", "thA", "tie-b")
	tieA.ID, tieB.ID = store.TaskIDPrefix+strings.Repeat("a", 32), store.TaskIDPrefix+strings.Repeat("b", 32)
	tieA.CreatedAt, tieB.CreatedAt = base.Add(time.Minute), base.Add(time.Minute)
	insert(t, s, tieA)
	insert(t, s, tieB)
	want = append([]string{tieB.ID, tieA.ID}, want...)

	otherThread := newTask("u1", "thB", "other-thread")
	otherThread.CreatedAt = base.Add(2 * time.Minute)
	insert(t, s, otherThread)
	otherUser := newTask("u2", "thA", "other-user")
	insert(t, s, otherUser)

	got, err := s.ListTasks(ctx, store.ListTasksParams{UserID: "u1", ThreadID: "thA"})
	must(t, "ListTasks", err)
	if !slices.Equal(ids(got), want) {
		t.Fatalf("ListTasks order:\ngot  %v\nwant %v", ids(got), want)
	}
	got, err = s.ListTasks(ctx, store.ListTasksParams{UserID: "u1", ThreadID: "thA", Limit: 3})
	must(t, "ListTasks limit 3", err)
	if !slices.Equal(ids(got), want[:3]) {
		t.Fatalf("ListTasks limit 3:\ngot  %v\nwant %v", ids(got), want[:3])
	}
	// Keyset pages: each continues after the last id of the one before,
	// across the created_at tie, and together they are the whole list.
	var paged []string
	for before := ""; ; {
		page, err := s.ListTasks(ctx, store.ListTasksParams{UserID: "u1", ThreadID: "thA", Limit: 2, Before: before})
		must(t, "ListTasks page", err)
		if len(page) == 0 {
			break
		}
		paged = append(paged, ids(page)...)
		before = page[len(page)-1].ID
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("ListTasks in pages of 2:\ngot  %v\nwant %v", paged, want)
	}
	// Another user's task id as the cursor lists nothing of u1's.
	got, err = s.ListTasks(ctx, store.ListTasksParams{UserID: "u1", ThreadID: "thA", Before: otherUser.ID})
	must(t, "ListTasks before another user's task", err)
	if len(got) != 0 {
		t.Fatalf("ListTasks before another user's task = %v, want none", ids(got))
	}
	got, err = s.ListTasks(ctx, store.ListTasksParams{UserID: "u1"})
	must(t, "ListTasks every thread", err)
	if wantAll := append([]string{otherThread.ID}, want...); !slices.Equal(ids(got), wantAll) {
		t.Fatalf("ListTasks every thread:\ngot  %v\nwant %v", ids(got), wantAll)
	}
	got, err = s.ListTasks(ctx, store.ListTasksParams{UserID: "u2", ThreadID: "thA"})
	must(t, "ListTasks u2", err)
	if !slices.Equal(ids(got), []string{otherUser.ID}) {
		t.Fatalf("u2 sees %v, want only %s", ids(got), otherUser.ID)
	}
	got, err = s.ListTasks(ctx, store.ListTasksParams{UserID: "nobody", ThreadID: "thA"})
	must(t, "ListTasks nobody", err)
	if got == nil || len(got) != 0 {
		t.Fatalf("ListTasks for an unknown user = %#v, want an empty, non-nil slice", got)
	}
}

func testClaimDue(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	now := time.Now()
	past, future := now.Add(-time.Hour), now.Add(time.Hour)

	duePoll := insert(t, s, newTask("u1", "th", "due-poll"))

	notDue := newTask("u1", "th", "not-due")
	notDue.NextPollAt = ptr(future)
	insert(t, s, notDue)

	noPoll := newTask("u1", "th", "no-poll")
	noPoll.NextPollAt = nil
	insert(t, s, noPoll)

	for _, status := range []string{store.TaskStatusCompleted, store.TaskStatusFailed, store.TaskStatusCancelled} {
		terminal := newTask("u1", "th", "terminal-"+status)
		terminal.Status = status
		terminal.CancelRequestedAt, terminal.NextCancelAt = ptr(past), ptr(past)
		insert(t, s, terminal)
	}

	leased := newTask("u1", "th", "leased")
	leased.LeaseOwner, leased.LeaseExpiresAt = "other", ptr(future)
	insert(t, s, leased)

	expired := newTask("u1", "th", "expired-lease")
	expired.Status = store.TaskStatusWorking
	expired.NextPollAt = ptr(past.Add(time.Minute))
	expired.LeaseOwner, expired.LeaseExpiresAt = "crashed", ptr(past)
	insert(t, s, expired)

	dueCancel := newTask("u1", "th", "due-cancel")
	dueCancel.Status = store.TaskStatusInputRequired
	dueCancel.NextPollAt = ptr(future)
	dueCancel.CancelRequestedAt, dueCancel.NextCancelAt = ptr(past), ptr(past.Add(2*time.Minute))
	insert(t, s, dueCancel)

	// Cancel requested and backing off: a due next_poll_at must not make it
	// claimable.
	cancelBackoff := newTask("u1", "th", "cancel-backoff")
	cancelBackoff.CancelRequestedAt, cancelBackoff.NextCancelAt = ptr(past), ptr(future)
	insert(t, s, cancelBackoff)

	w1 := store.ClaimParams{Owner: "w1", Lease: time.Minute, Limit: 50}
	polls, err := s.ClaimDuePolls(ctx, w1)
	must(t, "ClaimDuePolls", err)
	if want := []string{duePoll.ID, expired.ID}; !slices.Equal(ids(polls), want) {
		t.Fatalf("polls claimed %v, want %v (due poll, expired lease, in due order)", ids(polls), want)
	}
	cancels, err := s.ClaimDueCancels(ctx, w1)
	must(t, "ClaimDueCancels", err)
	if want := []string{dueCancel.ID}; !slices.Equal(ids(cancels), want) {
		t.Fatalf("cancels claimed %v, want %v", ids(cancels), want)
	}
	claimed := append(polls, cancels...)
	before := map[string]*store.Task{duePoll.ID: duePoll, expired.ID: expired, dueCancel.ID: dueCancel}
	for _, c := range claimed {
		if c.LeaseOwner != "w1" || c.LeaseExpiresAt == nil {
			t.Fatalf("claimed %s has lease %q until %v, want w1", c.RemoteTaskID, c.LeaseOwner, c.LeaseExpiresAt)
		}
		near(t, "lease_expires_at of "+c.RemoteTaskID, *c.LeaseExpiresAt, now.Add(time.Minute), 30*time.Second)
		b := before[c.ID]
		wantPoll, wantCancel := b.PollAttemptCount+1, b.CancelAttemptCount
		if c.CancelRequestedAt != nil {
			wantPoll, wantCancel = b.PollAttemptCount, b.CancelAttemptCount+1
		}
		if c.PollAttemptCount != wantPoll || c.CancelAttemptCount != wantCancel {
			t.Errorf("%s: poll attempts %d, cancel attempts %d; want %d and %d",
				c.RemoteTaskID, c.PollAttemptCount, c.CancelAttemptCount, wantPoll, wantCancel)
		}
		if !c.UpdatedAt.After(b.UpdatedAt) && !c.UpdatedAt.Equal(b.UpdatedAt) {
			t.Errorf("%s: updated_at went backwards", c.RemoteTaskID)
		}
		stored := get(t, s, c.ID)
		sameTask(t, "stored claim of "+c.RemoteTaskID, *stored, c)
	}

	w2 := store.ClaimParams{Owner: "w2", Lease: time.Minute, Limit: 50}
	again, err := s.ClaimDuePolls(ctx, w2)
	must(t, "second ClaimDuePolls", err)
	againCancels, err := s.ClaimDueCancels(ctx, w2)
	must(t, "second ClaimDueCancels", err)
	if again = append(again, againCancels...); len(again) != 0 {
		t.Fatalf("a second owner claimed %v while the leases are live", ids(again))
	}
	if got := get(t, s, leased.ID); got.LeaseOwner != "other" || got.PollAttemptCount != 0 {
		t.Fatalf("the row leased by another owner changed: owner %q, attempts %d", got.LeaseOwner, got.PollAttemptCount)
	}
}

func testClaimLimitAndOrder(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	base := time.Now().Add(-time.Hour)
	var want []string
	for i := range 5 {
		task := newTask("u1", "th", fmt.Sprintf("r%d", i))
		task.NextPollAt = ptr(base.Add(time.Duration(4-i) * time.Minute)) // r4 is the most overdue
		insert(t, s, task)
		want = append([]string{task.ID}, want...)
	}
	first, err := s.ClaimDuePolls(ctx, store.ClaimParams{Owner: "w", Lease: time.Minute, Limit: 2})
	must(t, "ClaimDuePolls limit 2", err)
	if !slices.Equal(ids(first), want[:2]) {
		t.Fatalf("first claim %v, want the two most overdue %v", ids(first), want[:2])
	}
	rest, err := s.ClaimDuePolls(ctx, store.ClaimParams{Owner: "w", Lease: time.Minute, Limit: 10})
	must(t, "ClaimDuePolls rest", err)
	if !slices.Equal(ids(rest), want[2:]) {
		t.Fatalf("second claim %v, want %v", ids(rest), want[2:])
	}
}

// testClaimPollsConcurrent: claimers racing for due polls each get
// distinct rows, and together every row once.
func testClaimPollsConcurrent(t *testing.T, s store.TaskStore) {
	const tasks = 60
	for i := range tasks {
		insert(t, s, newTask("u1", "th", fmt.Sprintf("r%02d", i)))
	}
	claimConcurrently(t, s.ClaimDuePolls, tasks)
}

// testClaimCancelsConcurrent: the same for requested cancels.
func testClaimCancelsConcurrent(t *testing.T, s store.TaskStore) {
	const tasks = 60
	for i := range tasks {
		task := insert(t, s, newTask("u1", "th", fmt.Sprintf("r%02d", i)))
		_, err := s.RequestCancel(t.Context(), store.RequestCancelParams{UserID: "u1", ThreadID: "th", TaskID: task.ID})
		must(t, "RequestCancel", err)
	}
	claimConcurrently(t, s.ClaimDueCancels, tasks)
}

// claimConcurrently runs claimers that call claim until it returns nothing,
// all released at once, and fails unless each of the rows due was claimed
// by exactly one of them (the leases are a minute: none expires meanwhile).
func claimConcurrently(t *testing.T, claim func(context.Context, store.ClaimParams) ([]store.Task, error), rows int) {
	t.Helper()
	const workers = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([][]string, workers)
		errs    = make([]error, workers)
	)
	for w := range workers {
		wg.Go(func() {
			<-start
			owner := fmt.Sprintf("worker-%d", w)
			for {
				claimed, err := claim(t.Context(), store.ClaimParams{Owner: owner, Lease: time.Minute, Limit: 3})
				if err != nil {
					errs[w] = err
					return
				}
				if len(claimed) == 0 {
					return
				}
				for _, c := range claimed {
					if c.LeaseOwner != owner {
						errs[w] = fmt.Errorf("claimed %s with lease owner %q", c.ID, c.LeaseOwner)
						return
					}
					results[w] = append(results[w], c.ID)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	seen := map[string]int{}
	for w := range workers {
		must(t, fmt.Sprintf("worker %d", w), errs[w])
		for _, id := range results[w] {
			seen[id]++
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("task %s claimed %d times", id, n)
		}
	}
	if len(seen) != rows {
		t.Fatalf("%d distinct tasks claimed, want %d", len(seen), rows)
	}
}

func testClaimInvalid(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	for name, p := range map[string]store.ClaimParams{
		"no owner":       {Lease: time.Minute, Limit: 1},
		"zero lease":     {Owner: "w", Limit: 1},
		"zero limit":     {Owner: "w", Lease: time.Minute},
		"negative lease": {Owner: "w", Lease: -time.Minute, Limit: 1},
	} {
		for what, claim := range map[string]func(context.Context, store.ClaimParams) ([]store.Task, error){
			"polls": s.ClaimDuePolls, "cancels": s.ClaimDueCancels, "notifications": s.ClaimDueNotifications,
		} {
			_, err := claim(ctx, p)
			wantErr(t, name+" ("+what+")", err, store.ErrInvalid)
		}
	}
}

func testLeaseExpiry(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	task := insert(t, s, newTask("u1", "th", "r"))

	// A claimed two minutes ago with a one-minute lease: a crashed owner.
	a, err := s.ClaimDuePolls(ctx, store.ClaimParams{Owner: "a", Lease: time.Minute, Limit: 1, Now: ago(2 * time.Minute)})
	must(t, "claim by a", err)
	if !slices.Equal(ids(a), []string{task.ID}) {
		t.Fatalf("a claimed %v, want %s", ids(a), task.ID)
	}
	wantErr(t, "update by a after its lease expired",
		update(ctx, s, task.ID, "a", func(t *store.Task) { t.Status = store.TaskStatusWorking }),
		store.ErrLeaseLost)

	// The expired row is claimable again.
	b, err := s.ClaimDuePolls(ctx, store.ClaimParams{Owner: "b", Lease: time.Minute, Limit: 1})
	must(t, "claim by b", err)
	if !slices.Equal(ids(b), []string{task.ID}) || b[0].PollAttemptCount != 2 {
		t.Fatalf("b claimed %v (attempts %d), want %s with 2 attempts", ids(b), b[0].PollAttemptCount, task.ID)
	}
	wantErr(t, "update by a after b reclaimed",
		update(ctx, s, task.ID, "a", func(t *store.Task) { t.Status = store.TaskStatusFailed }),
		store.ErrLeaseLost)
	must(t, "update by b", update(ctx, s, task.ID, "b", func(t *store.Task) {
		t.Status = store.TaskStatusWorking
	}))
	if got := get(t, s, task.ID); got.Status != store.TaskStatusWorking || got.LeaseOwner != "b" {
		t.Fatalf("after b's update: status %q owner %q, want working and b", got.Status, got.LeaseOwner)
	}
}

// claimOnePoll claims the one due poll for owner.
func claimOnePoll(t *testing.T, s store.TaskStore, owner string) store.Task {
	t.Helper()
	claimed, err := s.ClaimDuePolls(t.Context(), store.ClaimParams{Owner: owner, Lease: time.Minute, Limit: 1})
	must(t, "claim", err)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d rows, want 1", len(claimed))
	}
	return claimed[0]
}

func testUpdateUnderLease(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	task := insert(t, s, newTask("u1", "th", "r"))
	before := claimOnePoll(t, s, "w")

	polledAt := ms(time.Now())
	var seen store.Task
	must(t, "UpdateTaskUnderLease", update(ctx, s, task.ID, "w", func(t *store.Task) {
		seen = *t
		t.Status = store.TaskStatusCompleted
		t.Result = json.RawMessage(`{"answer":42}`)
		t.ResultPreview = "42"
		t.CompletedAt = &polledAt
		t.LastPolledAt = &polledAt
		t.NextPollAt = nil
		t.LastPollError = ""
		t.ConsecutivePollErrorCount = 0
		t.EventVersion++
		t.EventFingerprint = strings.Repeat("0", 64)
		t.NotificationStatus = store.NotificationPending
		t.NextNotificationAt = &polledAt
		t.DispatchEvent = json.RawMessage(`{"status":"completed"}`)
		t.LeaseOwner, t.LeaseExpiresAt = "", nil // release
		// Immutable columns: ignored.
		t.TaskName = "renamed"
		t.UserID = "thief"
		t.RemoteTaskID = "other"
	}))
	sameTask(t, "the row update received", seen, before)

	got := get(t, s, task.ID)
	want := before
	want.Status = store.TaskStatusCompleted
	want.Result = json.RawMessage(`{"answer":42}`)
	want.ResultPreview = "42"
	want.CompletedAt, want.LastPolledAt, want.NextPollAt = &polledAt, &polledAt, nil
	want.EventVersion++
	want.EventFingerprint = strings.Repeat("0", 64)
	want.NotificationStatus = store.NotificationPending
	want.NextNotificationAt = &polledAt
	want.DispatchEvent = json.RawMessage(`{"status":"completed"}`)
	want.LeaseOwner, want.LeaseExpiresAt = "", nil
	want.UpdatedAt = got.UpdatedAt
	sameTask(t, "row after UpdateTaskUnderLease", *got, want)
	if got.UpdatedAt.Before(before.UpdatedAt) {
		t.Errorf("updated_at went backwards: %v < %v", got.UpdatedAt, before.UpdatedAt)
	}

	// The lease was released: the next write is fenced.
	wantErr(t, "update after releasing the lease",
		update(ctx, s, task.ID, "w", func(*store.Task) {}), store.ErrLeaseLost)
	wantErr(t, "update of a missing task",
		update(ctx, s, store.NewTaskID(), "w", func(*store.Task) {}), store.ErrLeaseLost)

	// An update that breaks the schema fails with ErrInvalid and writes nothing.
	other := insert(t, s, newTask("u1", "th", "r2"))
	claimOnePoll(t, s, "w")
	wantErr(t, "invalid update", update(ctx, s, other.ID, "w", func(t *store.Task) {
		t.Status = "bogus"
	}), store.ErrInvalid)
	if got := get(t, s, other.ID); got.Status != store.TaskStatusSubmitted || got.LeaseOwner != "w" {
		t.Fatalf("invalid update changed the row: status %q owner %q", got.Status, got.LeaseOwner)
	}
}

func testRequestCancel(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	now := time.Now()
	task := insert(t, s, newTask("u1", "th", "r"))

	got, err := s.RequestCancel(ctx, store.RequestCancelParams{UserID: "u1", ThreadID: "th", TaskID: task.ID})
	must(t, "RequestCancel", err)
	if got.CancelRequestedAt == nil || got.NextCancelAt == nil || !got.NextCancelAt.Equal(*got.CancelRequestedAt) {
		t.Fatalf("after RequestCancel: cancel_requested_at %v, next_cancel_at %v; want both now",
			got.CancelRequestedAt, got.NextCancelAt)
	}
	near(t, "cancel_requested_at", *got.CancelRequestedAt, now, time.Minute)
	if got.Status != store.TaskStatusSubmitted {
		t.Fatalf("RequestCancel changed the status to %q", got.Status)
	}
	sameTask(t, "RequestCancel result vs stored row", *get(t, s, task.ID), *got)

	// The cancel is due at once: a cancel claim takes it.
	claimed, err := s.ClaimDueCancels(ctx, store.ClaimParams{Owner: "canceller", Lease: time.Minute, Limit: 5})
	must(t, "claim the cancel", err)
	if !slices.Equal(ids(claimed), []string{task.ID}) || claimed[0].CancelAttemptCount != 1 ||
		claimed[0].PollAttemptCount != 0 {
		t.Fatalf("cancel claim returned %v (cancel attempts %d, poll attempts %d), want %s, 1, 0",
			ids(claimed), claimed[0].CancelAttemptCount, claimed[0].PollAttemptCount, task.ID)
	}

	// Repeating the request changes nothing, so the cancel lease is kept.
	again, err := s.RequestCancel(ctx, store.RequestCancelParams{UserID: "u1", ThreadID: "th", TaskID: task.ID})
	must(t, "second RequestCancel", err)
	sameTask(t, "second RequestCancel", *again, claimed[0])

	// A preset next_cancel_at is kept.
	preset := newTask("u1", "th", "preset")
	preset.NextCancelAt = ptr(now.Add(time.Hour))
	insert(t, s, preset)
	got, err = s.RequestCancel(ctx, store.RequestCancelParams{UserID: "u1", ThreadID: "th", TaskID: preset.ID})
	must(t, "RequestCancel with next_cancel_at set", err)
	if got.NextCancelAt == nil || !got.NextCancelAt.Equal(*preset.NextCancelAt) || got.CancelRequestedAt == nil {
		t.Fatalf("next_cancel_at = %v, want the preset %v", got.NextCancelAt, preset.NextCancelAt)
	}

	// Terminal tasks are returned unchanged.
	done := newTask("u1", "th", "done")
	done.Status = store.TaskStatusCompleted
	insert(t, s, done)
	got, err = s.RequestCancel(ctx, store.RequestCancelParams{UserID: "u1", ThreadID: "th", TaskID: done.ID})
	must(t, "RequestCancel on a terminal task", err)
	sameTask(t, "terminal task after RequestCancel", *got, *done)

	// Another user's task, another thread, or no task: not found.
	_, err = s.RequestCancel(ctx, store.RequestCancelParams{UserID: "u2", ThreadID: "th", TaskID: task.ID})
	wantErr(t, "another user's task", err, store.ErrNotFound)
	_, err = s.RequestCancel(ctx, store.RequestCancelParams{UserID: "u1", ThreadID: "other-thread", TaskID: task.ID})
	wantErr(t, "another thread's task", err, store.ErrNotFound)
	_, err = s.RequestCancel(ctx, store.RequestCancelParams{UserID: "u1", ThreadID: "th", TaskID: store.NewTaskID()})
	wantErr(t, "a missing task", err, store.ErrNotFound)
}

func testRequestCancelFencesPoll(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	task := insert(t, s, newTask("u1", "th", "r"))
	claimOnePoll(t, s, "poller")
	got, err := s.RequestCancel(ctx, store.RequestCancelParams{UserID: "u1", ThreadID: "th", TaskID: task.ID})
	must(t, "RequestCancel", err)
	if got.LeaseOwner != "" || got.LeaseExpiresAt != nil {
		t.Fatalf("RequestCancel kept the poll lease: %q until %v", got.LeaseOwner, got.LeaseExpiresAt)
	}
	wantErr(t, "the in-flight poll's update", update(ctx, s, task.ID, "poller", func(t *store.Task) {
		t.Status = store.TaskStatusWorking
	}), store.ErrLeaseLost)
	if got := get(t, s, task.ID); got.Status != store.TaskStatusSubmitted {
		t.Fatalf("the fenced update wrote status %q", got.Status)
	}
}

// testTaskNow: the Now parameter replaces the database clock in what the task
// statements write and in the due and lease comparisons.
func testTaskNow(t *testing.T, s store.TaskStore) {
	ctx := t.Context()
	at := ms(time.Now().Add(-24 * time.Hour))
	due := newTask("u1", "th", "due")
	due.NextPollAt = &at
	inserted, err := s.InsertTask(ctx, store.InsertTaskParams{Task: *due, Now: &at})
	must(t, "InsertTask at a fixed time", err)
	if !inserted.CreatedAt.Equal(at) || !inserted.UpdatedAt.Equal(at) {
		t.Fatalf("created_at %v, updated_at %v; want both the Now parameter %v", inserted.CreatedAt, inserted.UpdatedAt, at)
	}
	later := newTask("u1", "th", "later")
	later.NextPollAt = ptr(at.Add(time.Millisecond))
	insert(t, s, later)

	// At `at` only the first row is due.
	claimed, err := s.ClaimDuePolls(ctx, store.ClaimParams{Owner: "w", Lease: time.Minute, Limit: 10, Now: &at})
	must(t, "ClaimDuePolls at a fixed time", err)
	if !slices.Equal(ids(claimed), []string{inserted.ID}) {
		t.Fatalf("claimed %v at %v, want only %s", ids(claimed), at, inserted.ID)
	}
	c := claimed[0]
	if c.LeaseExpiresAt == nil || !c.LeaseExpiresAt.Equal(at.Add(time.Minute)) || !c.UpdatedAt.Equal(at) {
		t.Fatalf("lease until %v, updated_at %v; want Now + lease %v and Now", c.LeaseExpiresAt, c.UpdatedAt, at.Add(time.Minute))
	}

	// The lease is live until its expiry, and lost from then on.
	last, expiry := at.Add(time.Minute-time.Millisecond), at.Add(time.Minute)
	must(t, "update at the lease's last instant", s.UpdateTaskUnderLease(ctx, store.UpdateUnderLeaseParams{
		ID: c.ID, Owner: "w", Now: &last, Update: func(t *store.Task) { t.Status = store.TaskStatusWorking },
	}))
	if got := get(t, s, c.ID); !got.UpdatedAt.Equal(last) || got.Status != store.TaskStatusWorking {
		t.Fatalf("after the update: status %q, updated_at %v; want working and %v", got.Status, got.UpdatedAt, last)
	}
	wantErr(t, "update at the lease's expiry", s.UpdateTaskUnderLease(ctx, store.UpdateUnderLeaseParams{
		ID: c.ID, Owner: "w", Now: &expiry, Update: func(*store.Task) {},
	}), store.ErrLeaseLost)
	reclaimed, err := s.ClaimDuePolls(ctx, store.ClaimParams{Owner: "w2", Lease: time.Minute, Limit: 10, Now: &expiry})
	must(t, "ClaimDuePolls at the expiry", err)
	if want := []string{inserted.ID, later.ID}; !slices.Equal(ids(reclaimed), want) {
		t.Fatalf("claimed %v at the expiry, want %v", ids(reclaimed), want)
	}

	cancelAt := expiry.Add(time.Second)
	got, err := s.RequestCancel(ctx, store.RequestCancelParams{UserID: "u1", ThreadID: "th", TaskID: c.ID, Now: &cancelAt})
	must(t, "RequestCancel at a fixed time", err)
	if got.CancelRequestedAt == nil || !got.CancelRequestedAt.Equal(cancelAt) || !got.NextCancelAt.Equal(cancelAt) {
		t.Fatalf("cancel requested at %v, next cancel at %v; want %v", got.CancelRequestedAt, got.NextCancelAt, cancelAt)
	}
	before := cancelAt.Add(-time.Millisecond)
	early, err := s.ClaimDueCancels(ctx, store.ClaimParams{Owner: "c", Lease: time.Minute, Limit: 10, Now: &before})
	must(t, "ClaimDueCancels before the request", err)
	if len(early) != 0 {
		t.Fatalf("a cancel was claimed before it was due: %v", ids(early))
	}
}
