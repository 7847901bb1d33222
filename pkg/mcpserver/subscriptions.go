package mcpserver

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Resource subscriptions (docs/federation.md §5). A legacy session's
// resources/subscribe and resources/unsubscribe go to toolcall
// (mcpbus.resources.subscribe, .unsubscribe) for the session's subscriber
// id (SessionSubscriber) and are kept with the session
// (Session.Subscriptions), so the replica holding its stream sends them
// again (Subscribe) and delivers the updates (ResourceUpdatedNotification)
// that name its subscriber. A 2026-07-28 subscriptions/listen's
// resourceSubscriptions are subscribed by the transport holding the listen
// for the stream's own subscriber id. A URI that is unmapped, denied, or
// of a server without subscriptions is -32602 naming the server, never
// quoting the URI.

// SessionSubscription is one resource a legacy session subscribed to: its
// visible URI and the thread it was subscribed in (a stdio server's
// session is the thread's).
type SessionSubscription struct {
	URI    string `json:"uri"`
	Thread string `json:"thread"`
}

// MaxSessionSubscriptions bounds a session's subscriptions (the session
// is mirrored by every api replica).
const MaxSessionSubscriptions = 64

// SessionSubscriber is a legacy session's subscriber id: derived from the
// session id, which itself never travels on the bus.
func SessionSubscriber(sessionID string) string { return bus.Digest("subscriber\x00" + sessionID) }

// Subscribe asks toolcall for uri's updates for subscriber (unsubscribe:
// to end them). It is sent again by a stream's holder while the stream is
// open (bus.SubscriptionRefreshSeconds).
func (s *Server) Subscribe(ctx context.Context, user, thread, subscriber, uri string, unsubscribe bool) *Error {
	subject := s.deps.Names.ResourcesSubscribe()
	if unsubscribe {
		subject = s.deps.Names.ResourcesUnsubscribe()
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	_, err := bus.Request[bus.ResourcesSubscribeReply](ctx, s.deps.NC, subject,
		bus.ResourcesSubscribeRequest{URI: uri, Subscriber: subscriber, UserID: user, ThreadID: thread})
	if err == nil {
		return nil
	}
	what := "resources/subscribe"
	if unsubscribe {
		what = "resources/unsubscribe"
	}
	if e := bus.AsError(err); e.Code == bus.CodeGuardrailDenied {
		return &Error{Code: CodeInvalidParams, Message: e.Message, Data: mustJSON(map[string]string{"mcpbus_code": string(e.Code)})}
	}
	return s.fedError(err, what)
}

// subscribeMethod is a legacy session's resources/subscribe (or
// /unsubscribe).
func (s *Server) subscribeMethod(unsubscribe bool) method {
	return func(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
		var p struct {
			URI string `json:"uri"`
		}
		if err := json.Unmarshal(orEmpty(params), &p); err != nil || p.URI == "" {
			return nil, Errorf(CodeInvalidParams, "params: uri is required")
		}
		subs := x.Session.Subscriptions
		i := slices.IndexFunc(subs, func(sub SessionSubscription) bool { return sub.URI == p.URI })
		if !unsubscribe && i < 0 && len(subs) >= MaxSessionSubscriptions {
			return nil, Errorf(CodeInvalidParams, "a session subscribes to at most %d resources", MaxSessionSubscriptions)
		}
		thread := x.Thread()
		if i >= 0 {
			thread = subs[i].Thread
		}
		if rerr := s.Subscribe(ctx, x.UserID, thread, SessionSubscriber(x.Session.ID), p.URI, unsubscribe); rerr != nil {
			return nil, rerr
		}
		switch {
		case unsubscribe && i >= 0:
			x.Session.Subscriptions, x.Changed = slices.Delete(slices.Clone(subs), i, i+1), true
		case !unsubscribe && i < 0:
			x.Session.Subscriptions, x.Changed = append(slices.Clone(subs), SessionSubscription{URI: p.URI, Thread: thread}), true
		}
		return struct{}{}, nil
	}
}

// ResourceUpdatedNotification is notifications/resources/updated for a
// visible uri; on a subscriptions/listen stream (subscription set) tagged
// with its subscription id.
func ResourceUpdatedNotification(uri string, subscription json.RawMessage) *Message {
	params := map[string]any{"uri": uri}
	if subscription != nil {
		params["_meta"] = map[string]json.RawMessage{MetaSubscriptionID: subscription}
	}
	return Notification("notifications/resources/updated", params)
}

// ListenAck is the acknowledgement of the subscriptions/listen with id
// for filter (its ResourceSubscriptions those actually subscribed).
func ListenAck(id json.RawMessage, filter ListenFilter) *Message {
	return Notification("notifications/subscriptions/acknowledged", map[string]any{
		"_meta":         map[string]json.RawMessage{MetaSubscriptionID: id},
		"notifications": filter,
	})
}
