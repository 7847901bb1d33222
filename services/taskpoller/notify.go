package taskpoller

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// publishTimeout bounds one JetStream publish.
const publishTimeout = 10 * time.Second

// notify delivers the outbox event of a row claimed for notification: it
// freezes the event to deliver, dead-letters a row out of attempts, publishes
// it with Nats-Msg-Id mcp-task:<task_id>:<version> (JetStream drops a
// republished version), and records the ack or the failure.
func (p *poller) notify(ctx context.Context, st *passStats, t store.Task) {
	s := p.settings()
	now := p.clock()
	if tasks.PrepareDispatch(&t, s.TrackingDegradedAfterErrors) {
		// Freeze the snapshot first, so that a retry publishes the same event.
		frozen := t
		if !p.updateNotification(ctx, st, t.ID, func(row *store.Task) {
			tasks.PrepareDispatch(row, s.TrackingDegradedAfterErrors)
			frozen = *row
		}) {
			return
		}
		t = frozen
	}
	if tasks.ShouldDeadLetter(&t) {
		if p.updateNotification(ctx, st, t.ID, func(row *store.Task) { tasks.DeadLetter(row, now) }) {
			p.s.deps.Metrics.DeadLetters.Inc()
		}
		return
	}
	msg, err := tasks.EventMessage(&t)
	if err != nil {
		p.updateNotification(ctx, st, t.ID, func(row *store.Task) { tasks.DeliveryFailed(row, err.Error(), p.clock(), s) })
		return
	}
	body, _ := json.Marshal(msg) // always encodes: fields are valid JSON
	nm := nats.NewMsg(p.s.deps.Names.TaskEvents(t.ThreadID))
	nm.Data = body
	nm.Header.Set(jetstream.MsgIDHeader, bus.TaskEventMsgID(t.ID, t.DispatchVersion))
	pctx, cancel := context.WithTimeout(ctx, publishTimeout)
	_, err = p.s.deps.Events.PublishMsg(pctx, nm)
	cancel()
	if err != nil && ctx.Err() != nil {
		// Stopping: leave the row for its lease to expire.
		p.updateNotification(ctx, st, t.ID, func(row *store.Task) {
			row.NotificationLeaseOwner, row.NotificationLeaseExpiresAt = "", nil
		})
		return
	}
	at := p.clock()
	version := t.DispatchVersion
	if err != nil {
		p.s.log.Warn("task notification publish failed", "task_id", t.ID, observability.Err(err))
		p.s.deps.Metrics.PublishFailures.Inc()
		p.updateNotification(ctx, st, t.ID, func(row *store.Task) {
			if row.DispatchVersion == version {
				tasks.DeliveryFailed(row, "publish failed: "+err.Error(), at, s)
			}
		})
		return
	}
	st.published.Add(1)
	p.s.deps.Metrics.Published.Inc()
	p.updateNotification(ctx, st, t.ID, func(row *store.Task) { tasks.Delivered(row, version, at) })
}

// updateNotification writes the outbox under the notification lease and
// reports whether it did.
func (p *poller) updateNotification(ctx context.Context, st *passStats, id string, fn func(*store.Task)) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	start := time.Now()
	err := p.tasks.UpdateNotificationUnderLease(wctx, store.UpdateUnderLeaseParams{ID: id, Owner: p.owner, Update: fn})
	st.addWrite(time.Since(start))
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		st.fenced.Add(1)
		p.s.log.Info("notification update discarded: lease lost", "task_id", id)
		return false
	case err != nil:
		p.s.log.Warn("cannot store notification state", "task_id", id, observability.Err(err))
		return false
	}
	return true
}
