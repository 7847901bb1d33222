package tasks

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// MaxNotificationAttempts failed deliveries end in dead_letter.
const MaxNotificationAttempts = 5

// The notification outbox transitions (reference §4.7, with a JetStream
// publish ack as the delivery). The caller holds the notification lease;
// every function that ends an attempt releases it.

// ShouldDeadLetter reports whether the row used up its delivery attempts.
func ShouldDeadLetter(t *store.Task) bool {
	return t.NotificationAttemptCount >= MaxNotificationAttempts
}

// DeadLetter stops delivering the row's dispatched event: dead_letter with
// "Notification delivery stopped after <n> failed attempts: <last error>",
// or, when a newer event exists, pending for that event instead. It does not
// count as an attempt.
func DeadLetter(t *store.Task, now time.Time) {
	msg := fmt.Sprintf("Notification delivery stopped after %d failed attempts: %s", t.NotificationAttemptCount, t.NotificationError)
	t.NotificationError = BoundError(msg)
	if t.EventVersion > t.DispatchVersion {
		resetPending(t, now)
	} else {
		t.NotificationStatus = store.NotificationDeadLetter
		t.NextNotificationAt = nil
	}
	releaseNotificationLease(t)
}

// PrepareDispatch freezes the event to deliver on a claimed row: a pending
// or claimed row, or a retry row whose dispatched version is stale, gets
// dispatch_version = event_version and dispatch_event = the current event
// (attempts reset when the version changed), status claimed. It reports
// whether the row changed (and must be written before publishing).
func PrepareDispatch(t *store.Task, threshold int) bool {
	switch t.NotificationStatus {
	case store.NotificationPending, store.NotificationClaimed:
	case store.NotificationRetry:
		if t.DispatchVersion == t.EventVersion && len(t.DispatchEvent) > 0 {
			return false
		}
	default:
		return false
	}
	if t.DispatchVersion != t.EventVersion {
		t.NotificationAttemptCount = 0
		t.DispatchAttempt = 0
	}
	t.DispatchVersion = t.EventVersion
	ev, _ := json.Marshal(BuildEvent(t, threshold)) // always encodes
	t.DispatchEvent = ev
	t.NotificationStatus = store.NotificationClaimed
	return true
}

// EventMessage is what is published for the row's dispatched event.
func EventMessage(t *store.Task) (bus.TaskEventMessage, error) {
	var ev bus.TaskEvent
	if err := json.Unmarshal(t.DispatchEvent, &ev); err != nil {
		return bus.TaskEventMessage{}, fmt.Errorf("dispatch_event of %s: %w", t.ID, err)
	}
	return bus.TaskEventMessage{TaskEvent: ev, ThreadID: t.ThreadID, UserID: t.UserID, EventVersion: t.DispatchVersion}, nil
}

// Delivered records the publish ack of version: notified_version moves up,
// then delivered, or pending when a newer event exists.
func Delivered(t *store.Task, version int, now time.Time) {
	t.NotifiedVersion = max(t.NotifiedVersion, version)
	t.NotificationError = ""
	if t.EventVersion > t.NotifiedVersion {
		resetPending(t, now)
	} else {
		t.NotificationStatus = store.NotificationDelivered
		t.NextNotificationAt = nil
	}
	releaseNotificationLease(t)
}

// DeliveryFailed counts a failed publish and schedules a retry after
// Backoff(attempts so far).
func DeliveryFailed(t *store.Task, msg string, now time.Time, s Settings) {
	next := now.Add(Backoff(t.NotificationAttemptCount, s.PollInterval, s.MaxPollBackoff))
	t.NotificationAttemptCount++
	t.DispatchAttempt = t.NotificationAttemptCount
	t.NotificationError = BoundError(msg)
	t.NotificationStatus = store.NotificationRetry
	t.NextNotificationAt = &next
	releaseNotificationLease(t)
}

func resetPending(t *store.Task, now time.Time) {
	t.NotificationStatus = store.NotificationPending
	t.NextNotificationAt = &now
	t.NotificationAttemptCount = 0
	t.DispatchAttempt = 0
}

func releaseNotificationLease(t *store.Task) {
	t.NotificationLeaseOwner = ""
	t.NotificationLeaseExpiresAt = nil
}
