package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
)

// listener is one open stream's inbox for notifications.
type listener struct {
	user string
	// out holds notifications/tasks (and, on /sse, the responses).
	out chan []byte
	// changed holds the lists (bus.ListTools, ...) whose list_changed is
	// pending, guarded by mu; wake is signalled when one is added. A
	// list already pending is not queued twice (one list_changed is as
	// good as two) and none is ever dropped for want of room.
	mu      sync.Mutex
	changed []string
	wake    chan struct{}
	// taskThread, when set, is the thread whose task status notifications
	// the stream gets (a 2025-11-25 session's GET stream; a 2026-07-28
	// subscriptions/listen naming taskIds).
	taskThread string
	// taskIDs, for a subscriptions/listen, are the tasks whose
	// notifications/tasks it gets, on the stream opened by the request
	// with id subscription.
	taskIDs      map[string]bool
	subscription json.RawMessage
	// subscriber is the stream's subscriber id for resource updates
	// (subscriptions.go; "" for none), listenID the id of the
	// subscriptions/listen the updates are tagged with (nil: a legacy
	// stream).
	subscriber string
	listenID   json.RawMessage
}

// notify queues b for l without blocking: a task status notification is
// dropped when the inbox is full (clients poll tasks/get).
func (l *listener) notify(b []byte) {
	select {
	case l.out <- b:
	default:
	}
}

// listsChanged marks lists' list_changed pending for l.
func (l *listener) listsChanged(lists []string) {
	l.mu.Lock()
	for _, list := range lists {
		if !slices.Contains(l.changed, list) {
			l.changed = append(l.changed, list)
		}
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// takeChanged returns the pending lists and clears them.
func (l *listener) takeChanged() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.changed
	l.changed = nil
	return out
}

// newListener is an open stream's listener with an inbox of size n.
func newListener(user string, n int) *listener {
	return &listener{user: user, out: make(chan []byte, n), wake: make(chan struct{}, 1)}
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

// broadcast marks lists changed on the open streams of user ("" for every
// user).
func (h *Handler) broadcast(user string, lists []string) {
	if len(lists) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listeners {
		if user == "" || l.user == user {
			l.listsChanged(lists)
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
		h.broadcast(user, mcpserver.ChangedLists(m.Data, user))
	})
	if err != nil {
		return fmt.Errorf("mcphttp: subscribe %s: %w", h.deps.Names.EventsCatalog(), err)
	}
	personal, err := h.deps.NC.Subscribe(h.deps.Names.PersonalEventsAll(), func(m *nats.Msg) {
		var ev bus.PersonalServersRequest
		h.deps.Server.CatalogChanged()
		if json.Unmarshal(m.Data, &ev) == nil && ev.UserID != "" {
			// A change of the user's connections changes every list.
			h.broadcast(ev.UserID, mcpserver.AnnouncedLists())
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
			h.broadcast(ev.UserID, []string{bus.ListTools})
		}
	})
	if err != nil {
		return errors.Join(fmt.Errorf("mcphttp: subscribe %s: %w", h.deps.Names.InternalMCPPromoted(), err), cat.Unsubscribe(), personal.Unsubscribe())
	}
	taskEvents, err := h.deps.NC.Subscribe(h.deps.Names.TaskEvents("*"), h.taskEvent)
	if err != nil {
		return errors.Join(fmt.Errorf("mcphttp: subscribe %s: %w", h.deps.Names.TaskEvents("*"), err), cat.Unsubscribe(), personal.Unsubscribe(), promoted.Unsubscribe())
	}
	updates, err := h.deps.NC.Subscribe(h.deps.Names.ResourcesUpdatedAll(), h.resourceUpdated)
	if err != nil {
		return errors.Join(fmt.Errorf("mcphttp: subscribe %s: %w", h.deps.Names.ResourcesUpdatedAll(), err), cat.Unsubscribe(), personal.Unsubscribe(), promoted.Unsubscribe(), taskEvents.Unsubscribe())
	}
	if err := h.deps.NC.Flush(); err != nil {
		return errors.Join(fmt.Errorf("mcphttp: flush subscriptions: %w", err), cat.Unsubscribe(), personal.Unsubscribe(), promoted.Unsubscribe(), taskEvents.Unsubscribe(), updates.Unsubscribe())
	}
	h.mu.Lock()
	h.subs = append(h.subs, cat, personal, promoted, taskEvents, updates)
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
