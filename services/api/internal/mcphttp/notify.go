package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
)

// listChanged is the notification every open stream gets when the catalog
// may have changed.
var listChanged = []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)

// isListChanged reports one of the list_changed notifications of the
// catalog event handler (Listen).
func isListChanged(b []byte) bool {
	return bytes.HasPrefix(b, []byte(`{"jsonrpc":"2.0","method":"notifications/`)) && bytes.Contains(b, []byte(`/list_changed"`))
}

// listener is one open stream's inbox for notifications.
type listener struct {
	user string
	out  chan []byte
	// taskThread, when set, is the thread whose task status notifications
	// the stream gets (a 2025-11-25 session's GET stream; a 2026-07-28
	// subscriptions/listen naming taskIds).
	taskThread string
	// taskIDs, for a subscriptions/listen, are the tasks whose
	// notifications/tasks it gets, on the stream opened by the request
	// with id subscription.
	taskIDs      map[string]bool
	subscription json.RawMessage
}

// notify queues b for l without blocking: a stream whose inbox is full
// already has a list_changed pending, and one is as good as two; a task
// status notification may be dropped likewise (clients poll tasks/get).
func (l *listener) notify(b []byte) {
	select {
	case l.out <- b:
	default:
	}
}

// listen registers a stream for notifications; the returned func removes it.
func (h *Handler) listen(l *listener) func() {
	h.mu.Lock()
	h.listeners[l] = struct{}{}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.listeners, l)
		h.mu.Unlock()
	}
}

// broadcast sends b to the open streams of user ("" for every user).
func (h *Handler) broadcast(user string, b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listeners {
		if user == "" || l.user == user {
			l.notify(b)
		}
	}
}

// Listen subscribes to the events that change a caller's catalog, on
// every replica: a new catalog (mcpbus.events.catalog: reset, config
// change, rediscovery) reaches every open stream, a user's personal
// connection change reaches that user's, a tool_search promotion the
// user's after this replica's promotion mirror dropped the (user, thread)
// it names (so the tools/list the notification prompts reads it). It also
// starts the session and promotion mirrors (their bucket watches). Close
// unsubscribes and stops them.
func (h *Handler) Listen() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.sessions.cache.Start(ctx); err != nil {
		return fmt.Errorf("mcphttp: sessions: %w", err)
	}
	if err := h.deps.Server.Start(ctx); err != nil {
		h.sessions.cache.Stop()
		return fmt.Errorf("mcphttp: %w", err)
	}
	cat, err := h.deps.NC.Subscribe(h.deps.Names.EventsCatalog(), func(m *nats.Msg) {
		h.deps.Server.CatalogChanged()
		// A personal connection's own list_changed is its user's alone.
		user := mcpserver.EventUser(m.Data)
		for _, l := range mcpserver.ChangedLists(m.Data, user) {
			if l == bus.ListTools {
				h.broadcast(user, listChanged)
			} else {
				h.broadcast(user, mcpserver.ListChangedNotification(l).Encode())
			}
		}
	})
	if err != nil {
		return fmt.Errorf("mcphttp: subscribe %s: %w", h.deps.Names.EventsCatalog(), err)
	}
	personal, err := h.deps.NC.Subscribe(h.deps.Names.PersonalEventsAll(), func(m *nats.Msg) {
		var ev bus.PersonalServersRequest
		h.deps.Server.CatalogChanged()
		if json.Unmarshal(m.Data, &ev) == nil && ev.UserID != "" {
			h.broadcast(ev.UserID, listChanged)
		}
	})
	if err != nil {
		_ = cat.Unsubscribe()
		return fmt.Errorf("mcphttp: subscribe %s: %w", h.deps.Names.PersonalEventsAll(), err)
	}
	promoted, err := h.deps.NC.Subscribe(h.deps.Names.InternalMCPPromoted(), func(m *nats.Msg) {
		var ev bus.ToolsSearchRequest
		if json.Unmarshal(m.Data, &ev) == nil && ev.UserID != "" {
			h.deps.Server.PromotionAnnounced(ev.UserID, ev.ThreadID)
			h.broadcast(ev.UserID, listChanged)
		}
	})
	if err != nil {
		return errors.Join(fmt.Errorf("mcphttp: subscribe %s: %w", h.deps.Names.InternalMCPPromoted(), err), cat.Unsubscribe(), personal.Unsubscribe())
	}
	taskEvents, err := h.deps.NC.Subscribe(h.deps.Names.TaskEvents("*"), h.taskEvent)
	if err != nil {
		return errors.Join(fmt.Errorf("mcphttp: subscribe %s: %w", h.deps.Names.TaskEvents("*"), err), cat.Unsubscribe(), personal.Unsubscribe(), promoted.Unsubscribe())
	}
	if err := h.deps.NC.Flush(); err != nil {
		return errors.Join(fmt.Errorf("mcphttp: flush subscriptions: %w", err), cat.Unsubscribe(), personal.Unsubscribe(), promoted.Unsubscribe(), taskEvents.Unsubscribe())
	}
	h.mu.Lock()
	h.subs = append(h.subs, cat, personal, promoted, taskEvents)
	h.mu.Unlock()
	return nil
}

// taskEvent turns a task event (mcpbus.events.tasks.<thread>) into
// notifications/tasks/status on the open streams of the task's user in its
// thread: the task is read once, off the subscription's goroutine, with the
// owner's identity (the poller's ownership check applies).
func (h *Handler) taskEvent(m *nats.Msg) {
	var ev bus.TaskEventMessage
	if json.Unmarshal(m.Data, &ev) != nil || ev.UserID == "" || ev.TaskID == "" {
		return
	}
	h.mu.Lock()
	var to, modern []*listener
	for l := range h.listeners {
		switch {
		case l.taskThread == "" || l.user != ev.UserID || l.taskThread != ev.ThreadID:
		case l.taskIDs == nil:
			to = append(to, l)
		case l.taskIDs[ev.TaskID]:
			modern = append(modern, l)
		}
	}
	h.mu.Unlock()
	if len(to) == 0 && len(modern) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if len(to) > 0 {
			if msg, ok := h.deps.Server.TaskStatus(ctx, ev.UserID, ev.ThreadID, ev.TaskID); ok {
				b := msg.Encode()
				for _, l := range to {
					l.notify(b)
				}
			}
		}
		if len(modern) > 0 {
			if build, ok := h.deps.Server.ExtensionTaskStatus(ctx, ev.UserID, ev.ThreadID, ev.TaskID); ok {
				for _, l := range modern {
					l.notify(build(l.subscription).Encode())
				}
			}
		}
	}()
}
