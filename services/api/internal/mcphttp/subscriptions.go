package mcphttp

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Resource subscriptions on the streams this replica holds
// (docs/federation.md §5). Every replica subscribes
// mcpbus.resources.updated.* and hands each update to its open streams of
// that user whose subscriber id the update names: a legacy session's
// streams (the GET stream, /sse) have the session's
// mcpserver.SessionSubscriber, a subscriptions/listen its own random one.
// While a stream is open its holder sends its subscriptions again every
// bus.SubscriptionRefreshSeconds (a legacy session's as the session
// lists them now, so a subscribe made through another replica is
// refreshed too); a listen unsubscribes its own when it closes, a session
// its own when it is deleted or its /sse stream ends.

// subscriptionRefresh is how often an open stream sends its
// subscriptions again.
const subscriptionRefresh = bus.SubscriptionRefreshSeconds * time.Second

// resourceUpdated delivers one update (bus.ResourceUpdated on the user's
// subject) to the streams it names.
func (h *Handler) resourceUpdated(m *nats.Msg) {
	var ev bus.ResourceUpdated
	if json.Unmarshal(m.Data, &ev) != nil || ev.URI == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listeners {
		if l.subscriber == "" || !slices.Contains(ev.Subscribers, l.subscriber) || h.deps.Names.ResourcesUpdated(l.user) != m.Subject {
			continue
		}
		l.notify(mcpserver.ResourceUpdatedNotification(ev.URI, l.listenID).Encode())
	}
}

// refreshSession sends the session's subscriptions again now and every
// subscriptionRefresh until ctx ends (its stream closed).
func (h *Handler) refreshSession(ctx context.Context, sess *mcpserver.Session) {
	sub := mcpserver.SessionSubscriber(sess.ID)
	for {
		cur, err := h.sessions.load(ctx, sess.ID, sess.UserID)
		if err == nil {
			for _, s := range cur.Subscriptions {
				h.subscribe(ctx, sess.UserID, s.Thread, sub, s.URI, false)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(subscriptionRefresh):
		}
	}
}

// unsubscribeSession ends a session's subscriptions (its DELETE, the end of
// its /sse stream).
func (h *Handler) unsubscribeSession(ctx context.Context, sess *mcpserver.Session) {
	sub := mcpserver.SessionSubscriber(sess.ID)
	for _, s := range sess.Subscriptions {
		h.subscribe(ctx, sess.UserID, s.Thread, sub, s.URI, true)
	}
}

// subscribe sends one subscribe or unsubscribe, logging a failure (the
// URI without its query).
func (h *Handler) subscribe(ctx context.Context, user, thread, subscriber, uri string, unsubscribe bool) bool {
	if rerr := h.deps.Server.Subscribe(ctx, user, thread, subscriber, uri, unsubscribe); rerr != nil {
		if ctx.Err() == nil {
			h.log.Warn("resource subscription not sent", "uri", bus.StripQuery(uri), "unsubscribe", unsubscribe, observability.Err(rerr))
		}
		return false
	}
	return true
}

// listenSubscriptions subscribes a listen's resourceSubscriptions for
// subscriber and returns those in place (the acknowledged ones).
func (h *Handler) listenSubscriptions(ctx context.Context, user, thread, subscriber string, uris []string) []string {
	var ok []string
	for _, uri := range uris {
		if !slices.Contains(ok, uri) && h.subscribe(ctx, user, thread, subscriber, uri, false) {
			ok = append(ok, uri)
		}
	}
	return ok
}

// holdListenSubscriptions refreshes a listen's subscriptions until ctx
// ends, then unsubscribes them.
func (h *Handler) holdListenSubscriptions(ctx context.Context, user, thread, subscriber string, uris []string) {
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, uri := range uris {
			h.subscribe(uctx, user, thread, subscriber, uri, true)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(subscriptionRefresh):
		}
		for _, uri := range uris {
			h.subscribe(ctx, user, thread, subscriber, uri, false)
		}
	}
}
