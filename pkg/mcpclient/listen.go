package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// Resource subscriptions of a 2026-07-28 connection: the era has no
// resources/subscribe; a client asks for notifications/resources/updated
// with a subscriptions/listen whose resourceSubscriptions names the URIs,
// held open for as long as it wants them. ListenResources keeps one such
// listen per connection, replaced when the set changes; its updates reach
// Spec.OnResourceUpdated as a legacy session's do.

// resourceListen is a connection's listen for resource updates.
type resourceListen struct {
	// mu serializes ListenResources.
	mu    sync.Mutex
	uris  []string
	stop  func()          // ends the open listen; nil when none is open
	ended <-chan struct{} // closed when the open listen ended
	// pending is the acknowledgement awaited: the listen's request id
	// and the channel its acknowledgement closes.
	pendingMu sync.Mutex
	pendingID string
	pending   chan struct{}
}

// acknowledged closes the pending listen's channel when n acknowledges it
// (its _meta subscriptionId names the listen's request id) and reports
// whether it did.
func (l *resourceListen) acknowledged(n mcp.JSONRPCNotification) bool {
	id := fmt.Sprint(n.Params.Meta[mcp.MetaKeySubscriptionID])
	l.pendingMu.Lock()
	defer l.pendingMu.Unlock()
	if l.pending == nil || id != l.pendingID {
		return false
	}
	close(l.pending)
	l.pending = nil
	return true
}

// clearPending forgets the awaited acknowledgement ack.
func (l *resourceListen) clearPending(ack chan struct{}) {
	l.pendingMu.Lock()
	defer l.pendingMu.Unlock()
	if l.pending == ack {
		l.pending = nil
	}
}

// ErrNotModern is returned by ListenResources on a 2025-11-25 connection
// (which subscribes with resources/subscribe).
var ErrNotModern = errors.New("not a 2026-07-28 connection")

// ListenResources makes uris the resource subscriptions of a 2026-07-28
// connection: a subscriptions/listen with resourceSubscriptions uris is
// opened and, once the server acknowledged it, the previous one is ended
// (so no update is missed in between); an empty uris ends the listen. It
// returns when the new listen is acknowledged (or ended), or with the
// server's error when it refused it (the previous listen then stays).
// Over stdio the listen also carries the list_changed flags the
// connection listens for (a stdio session has one filter, which the last
// listen sets).
func (c *Client) ListenResources(ctx context.Context, uris []string) error {
	if !c.modern {
		return ErrNotModern
	}
	if c.closed.Load() {
		return c.wrap("listen for resource updates", ErrClosed, nil)
	}
	uris = slices.Clone(uris)
	slices.Sort(uris)
	uris = slices.Compact(uris)
	l := &c.resListen
	l.mu.Lock()
	defer l.mu.Unlock()
	if slices.Equal(uris, l.uris) && (len(uris) == 0 || l.live()) {
		return nil
	}
	var (
		stop  func()
		ended <-chan struct{}
	)
	if len(uris) > 0 {
		var err error
		if stop, ended, err = c.openResourceListen(ctx, uris); err != nil {
			return c.wrap("listen for resource updates", err, nil)
		}
	}
	if l.stop != nil {
		l.stop()
	}
	l.uris, l.stop, l.ended = uris, stop, ended
	return nil
}

// live reports an open listen that has not ended.
func (l *resourceListen) live() bool {
	if l.stop == nil {
		return false
	}
	select {
	case <-l.ended:
		return false
	default:
		return true
	}
}

// openResourceListen sends the listen for uris and waits for its
// acknowledgement; the func ends it.
func (c *Client) openResourceListen(ctx context.Context, uris []string) (func(), <-chan struct{}, error) {
	filter := map[string]any{"resourceSubscriptions": uris}
	if c.kind == TransportStdio && c.onListChanged != nil {
		for k, v := range c.listFilter {
			filter[k] = v // a stdio session has one filter (the last listen's)
		}
	}
	id := c.nextID()
	life, cancel := context.WithCancel(context.WithValue(c.life, backgroundKey{}, true))
	ack, ended := make(chan struct{}), make(chan struct{})
	l := &c.resListen
	l.pendingMu.Lock()
	l.pendingID, l.pending = fmt.Sprint(id.Value()), ack
	l.pendingMu.Unlock()
	var sendErr error
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer close(ended)
		_, _, sendErr = c.sendID(life, id, string(mcp.MethodSubscriptionsListen), map[string]any{"notifications": filter})
		if life.Err() == nil && sendErr == nil {
			c.logger.Info("mcp server ended the resource subscriptions' listen")
		}
	}()
	stop := func() {
		cancel()
		c.cancelRequest(id, errors.New("resource subscriptions changed"))
	}
	select {
	case <-ack:
		return stop, ended, nil
	case <-ended:
		cancel()
		l.clearPending(ack)
		if sendErr == nil {
			sendErr = errors.New("the server ended the listen before acknowledging it")
		}
		return nil, nil, sendErr
	case <-ctx.Done():
		stop()
		l.clearPending(ack)
		return nil, nil, ctx.Err()
	}
}
