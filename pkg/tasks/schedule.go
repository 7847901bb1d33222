package tasks

import (
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// maxBackoffExponent caps n in poll_interval * 2^n.
const maxBackoffExponent = 16

// Backoff is min(interval * 2^min(n,16), maxBackoff), for n >= 0 errors
// before this one.
func Backoff(n int, interval, maxBackoff time.Duration) time.Duration {
	n = min(max(n, 0), maxBackoffExponent)
	d := interval << n
	if d < interval || d > maxBackoff { // d < interval: overflow
		return maxBackoff
	}
	return d
}

// NextPoll is when a task in local status should next be polled after a
// successful poll that completed at polledAt: never for a terminal status;
// otherwise pollAfter (the remote hint, 0 when absent) or the poll interval,
// at least the input_required interval in that status, at most 24 hours.
func NextPoll(status string, pollAfter time.Duration, polledAt time.Time, s Settings) *time.Time {
	if store.IsTerminalStatus(status) {
		return nil
	}
	d := pollAfter
	if d <= 0 {
		d = s.PollInterval
	}
	if status == store.TaskStatusInputRequired {
		d = max(d, s.InputRequiredPollInterval)
	}
	d = min(d, MaxPollAfter)
	at := polledAt.Add(d)
	return &at
}

// TrackingDegraded reports whether t has had at least threshold consecutive
// poll errors.
func TrackingDegraded(t *store.Task, threshold int) bool {
	return t.ConsecutivePollErrorCount >= threshold
}
