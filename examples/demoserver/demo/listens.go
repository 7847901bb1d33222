package demo

import (
	"context"
	"slices"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ToolListenedResources answers the URIs the process's open 2026-07-28
// subscriptions/listen streams subscribe (resourceSubscriptions), sorted
// and comma-separated: empty once every listen holding one has ended.
const ToolListenedResources = "listened_resources"

// listens are the open 2026-07-28 subscriptions/listen streams that carry
// resourceSubscriptions. mcp-go's server acknowledges such a listen and
// holds it open but sends it no notifications/resources/updated (its
// broadcast skips what a listen did not opt in to, and resource updates
// are no list), so the demo sends them itself, tagged with the listen's
// subscription id.
type listens struct {
	mu   sync.Mutex
	open map[*listen]struct{}
}

// listen is one open listen: its session, request id and URIs.
type listen struct {
	session server.ClientSession
	id      any
	uris    []string
}

// add is the BeforeSubscriptionsListen hook: ctx is the listen's own, so
// it ends with the listen.
func (l *listens) add(ctx context.Context, id any, req *mcp.SubscriptionsListenRequest) {
	session := server.ClientSessionFromContext(ctx)
	if session == nil || len(req.Params.Notifications.ResourceSubscriptions) == 0 {
		return
	}
	ln := &listen{session: session, id: id, uris: slices.Clone(req.Params.Notifications.ResourceSubscriptions)}
	l.mu.Lock()
	if l.open == nil {
		l.open = map[*listen]struct{}{}
	}
	l.open[ln] = struct{}{}
	l.mu.Unlock()
	context.AfterFunc(ctx, func() {
		l.mu.Lock()
		delete(l.open, ln)
		l.mu.Unlock()
	})
}

// updated sends notifications/resources/updated for uri on every open
// listen that subscribed it (dropped when the stream's queue is full).
func (l *listens) updated(uri string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ln := range l.open {
		if !slices.Contains(ln.uris, uri) {
			continue
		}
		n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationResourceUpdated),
			Params: mcp.NotificationParams{Meta: map[string]any{mcp.MetaKeySubscriptionID: ln.id}, AdditionalFields: map[string]any{"uri": uri}},
		}}
		select {
		case ln.session.NotificationChannel() <- n:
		default:
		}
	}
}

// uris is the sorted union of the open listens' URIs.
func (l *listens) uris() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for ln := range l.open {
		for _, u := range ln.uris {
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	slices.Sort(out)
	return out
}
