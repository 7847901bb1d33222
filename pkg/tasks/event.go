package tasks

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// Eventful reports whether the row's state produces a notification event:
// input_required, a terminal state, or degraded tracking.
func Eventful(t *store.Task, threshold int) bool {
	return t.Status == store.TaskStatusInputRequired || store.IsTerminalStatus(t.Status) || TrackingDegraded(t, threshold)
}

// BuildEvent returns the event of the row's current state.
func BuildEvent(t *store.Task, threshold int) bus.TaskEvent {
	degraded := TrackingDegraded(t, threshold)
	ev := bus.TaskEvent{
		TaskID: t.ID, TaskName: t.TaskName, Status: t.Status,
		Result: t.Result, ResultPreview: nullable(t.ResultPreview), ResultTruncated: t.ResultTruncated,
		ResultArtifact: t.ResultArtifact, Error: nullable(t.Error), InputRequired: t.InputRequired,
		TrackingDegraded: degraded,
	}
	if degraded {
		ev.LastPollError = nullable(t.LastPollError)
	}
	return ev
}

// Fingerprint is the hex SHA-256 of the event's JSON with its keys sorted at
// every level.
func Fingerprint(ev bus.TaskEvent) string {
	sum := sha256.Sum256(canonical(ev))
	return hex.EncodeToString(sum[:])
}

// canonical encodes v as JSON with sorted keys (maps sort on encoding),
// numbers kept as written and no HTML escaping.
func canonical(v any) []byte {
	raw, _ := json.Marshal(v) // TaskEvent always encodes: its JSON fields are valid
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	_ = dec.Decode(&tree)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(tree)
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// RecordEvent records the row's event in its outbox after a state change
// made at now. When the state is eventful and its fingerprint differs from
// the last one, event_version goes up by one and, unless a delivery is in
// flight (claimed or retry; dispatched in the reference), the outbox is
// reset: pending, due now, attempts and dispatch fields cleared. It reports
// whether a new event was recorded.
func RecordEvent(t *store.Task, threshold int, now time.Time) bool {
	if !Eventful(t, threshold) {
		return false
	}
	fp := Fingerprint(BuildEvent(t, threshold))
	if fp == t.EventFingerprint {
		return false
	}
	t.EventFingerprint = fp
	t.EventVersion++
	switch t.NotificationStatus {
	case store.NotificationClaimed, store.NotificationDispatched, store.NotificationRetry:
	default:
		t.NotificationStatus = store.NotificationPending
		t.NextNotificationAt = &now
		t.NotificationAttemptCount = 0
		t.NotificationError = ""
		t.DispatchAttempt = 0
		t.DispatchEvent = nil
	}
	return true
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
