package tasks

import (
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// The state machine (reference §4.6). Each function changes a row the
// caller holds under its poll/cancel lease, releases that lease and records
// the notification event; at is when the remote call completed (or failed).
// Terminal rows never change: every function leaves one untouched and
// reports false.

// ApplyPoll stores a successful status poll: status and result fields,
// last_polled_at, errors reset, next poll time (or completed_at).
func ApplyPoll(t *store.Task, o Outcome, at time.Time, s Settings) bool {
	if store.IsTerminalStatus(t.Status) || t.CancelRequestedAt != nil {
		return false
	}
	setOutcome(t, o)
	t.LastPolledAt = &at
	t.LastPollError = ""
	t.ConsecutivePollErrorCount = 0
	t.NextPollAt = NextPoll(t.Status, o.PollAfter, at, s)
	finish(t, at)
	RecordEvent(t, s.TrackingDegradedAfterErrors, at)
	return true
}

// ApplyPollError records a transient poll error: same status, one more
// consecutive error, the next poll after Backoff(errors so far) from at.
func ApplyPollError(t *store.Task, msg string, at time.Time, s Settings) bool {
	if store.IsTerminalStatus(t.Status) || t.CancelRequestedAt != nil {
		return false
	}
	next := at.Add(Backoff(t.ConsecutivePollErrorCount, s.PollInterval, s.MaxPollBackoff))
	t.NextPollAt = &next
	t.LastPollError = BoundError(msg)
	t.ConsecutivePollErrorCount++
	releaseLease(t)
	RecordEvent(t, s.TrackingDegradedAfterErrors, at)
	return true
}

// ApplyFailure fails the task permanently (a protocol error, task_not_found
// handled as a reply, or an unresolvable task handle): status failed with the
// bounded message, no further polls or cancels.
func ApplyFailure(t *store.Task, msg string, at time.Time, s Settings) bool {
	if store.IsTerminalStatus(t.Status) {
		return false
	}
	t.Status = store.TaskStatusFailed
	t.Error = BoundError(msg)
	t.NextPollAt = nil
	t.NextCancelAt = nil
	finish(t, at)
	RecordEvent(t, s.TrackingDegradedAfterErrors, at)
	return true
}

// ApplyCancel stores the terminal status a cancel call reported.
func ApplyCancel(t *store.Task, o Outcome, at time.Time, s Settings) bool {
	if store.IsTerminalStatus(t.Status) || !store.IsTerminalStatus(o.Status) {
		return false
	}
	setOutcome(t, o)
	t.NextPollAt = nil
	t.NextCancelAt = nil
	finish(t, at)
	RecordEvent(t, s.TrackingDegradedAfterErrors, at)
	return true
}

// ApplyCancelError schedules the next cancel attempt after a failed one:
// Backoff(cancel_attempt_count-1) from at. Cancels are retried forever.
func ApplyCancelError(t *store.Task, msg string, at time.Time, s Settings) bool {
	if store.IsTerminalStatus(t.Status) {
		return false
	}
	next := at.Add(Backoff(t.CancelAttemptCount-1, s.PollInterval, s.MaxPollBackoff))
	t.NextCancelAt = &next
	t.LastCancelError = BoundError(msg)
	releaseLease(t)
	return true
}

func setOutcome(t *store.Task, o Outcome) {
	t.Status = o.Status
	t.Result = o.Result.Result
	t.ResultPreview = o.Result.Preview
	t.ResultTruncated = o.Result.Truncated
	t.ResultArtifact = o.ResultArtifact
	t.Error = o.Error
	t.InputRequired = o.InputRequired
}

// finish releases the lease and stamps completed_at on a terminal status.
func finish(t *store.Task, at time.Time) {
	releaseLease(t)
	if store.IsTerminalStatus(t.Status) {
		t.CompletedAt = &at
		t.NextPollAt = nil
	}
}

func releaseLease(t *store.Task) {
	t.LeaseOwner = ""
	t.LeaseExpiresAt = nil
}
