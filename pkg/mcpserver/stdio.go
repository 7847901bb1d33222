package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// maxStdioLine bounds one message on stdin (the REST body limit's order of
// magnitude; a client sending more is broken).
const maxStdioLine = 16 << 20

// ServeStdio serves MCP on r and w (the stdio transport: one JSON-RPC
// message per line) for one caller until r ends or ctx is cancelled. The
// session is this process's: kept in memory, one per stream. Requests are
// answered concurrently (a slow tool call does not hold up a ping); writes
// are serialised. It returns once every request in flight is answered.
// Catalog changes reach the client as notifications/tools/list_changed:
// on its session once initialized (legacy), on each subscriptions/listen
// (modern). Both eras are served on one stream: a request with a _meta
// protocol version is modern (stateless, its ids scoped to this stream),
// initialize opens the legacy session.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer, x Exchange) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wmu sync.Mutex
		xmu sync.Mutex // guards x: initialize and setLevel change it
		wg  sync.WaitGroup
	)
	write := func(m *Message) error {
		b := m.Encode()
		wmu.Lock()
		defer wmu.Unlock()
		_, err := w.Write(append(b, '\n'))
		return err
	}
	// Progress of a call goes out on stdout like everything else.
	x.Notify = func(m *Message) { _ = write(m) }
	// Modern requests have no session: their ids are this stream's.
	if x.Scope == "" {
		x.Scope = NewSessionID()
	}
	// listens are the open subscriptions/listen of modern clients (by
	// request id), guarded by xmu.
	listens := map[string]*stdioListen{}
	// list_changed: a new catalog, a change of this user's personal
	// connections or a tool_search promotion, once the session is
	// initialized.
	notifyLists := func(lists []string) {
		if len(lists) == 0 {
			return
		}
		xmu.Lock()
		ready := x.Session != nil
		var subs []*Message
		for _, l := range listens {
			for _, list := range lists {
				if l.filter.Wants(list) {
					subs = append(subs, ListChangedOn(list, l.id))
				}
			}
		}
		xmu.Unlock()
		if ready {
			for _, l := range lists {
				_ = write(ListChangedNotification(l))
			}
		}
		for _, m := range subs {
			_ = write(m)
		}
	}
	notify := func(*nats.Msg) { notifyLists([]string{bus.ListTools}) }
	// A change of this user's personal connections changes every list.
	personalChanged := func(*nats.Msg) { notifyLists(AnnouncedLists()) }
	// A catalog event: the lists it changed for this user (listchanged.go).
	catalogChanged := func(m *nats.Msg) { notifyLists(ChangedLists(m.Data, x.UserID)) }
	promotedHere := func(m *nats.Msg) {
		var ev bus.ToolsSearchRequest
		if json.Unmarshal(m.Data, &ev) == nil && ev.UserID == x.UserID {
			notify(m)
		}
	}
	// Resource updates of this user naming the session's or a listen's
	// subscriber (subscriptions.go).
	resourceUpdated := func(m *nats.Msg) {
		var ev bus.ResourceUpdated
		if json.Unmarshal(m.Data, &ev) != nil || ev.URI == "" {
			return
		}
		xmu.Lock()
		var out []*Message
		if x.Session != nil && slices.Contains(ev.Subscribers, SessionSubscriber(x.Session.ID)) {
			out = append(out, ResourceUpdatedNotification(ev.URI, nil))
		}
		for _, l := range listens {
			if l.subscriber != "" && slices.Contains(ev.Subscribers, l.subscriber) {
				out = append(out, ResourceUpdatedNotification(ev.URI, l.id))
			}
		}
		xmu.Unlock()
		for _, n := range out {
			_ = write(n)
		}
	}
	// subscriptions are what this stream subscribed, sent again every
	// bus.SubscriptionRefreshSeconds and ended when it closes.
	subscriptions := func() (out []stdioSubscription) {
		xmu.Lock()
		defer xmu.Unlock()
		if x.Session != nil {
			for _, sub := range x.Session.Subscriptions {
				out = append(out, stdioSubscription{subscriber: SessionSubscriber(x.Session.ID), thread: sub.Thread, uri: sub.URI})
			}
		}
		for _, l := range listens {
			for _, uri := range l.filter.ResourceSubscriptions {
				out = append(out, stdioSubscription{subscriber: l.subscriber, thread: x.Thread(), uri: uri})
			}
		}
		return out
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(bus.SubscriptionRefreshSeconds * time.Second):
			}
			for _, sub := range subscriptions() {
				_ = s.Subscribe(ctx, x.UserID, sub.thread, sub.subscriber, sub.uri, false)
			}
		}
	}()
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, sub := range subscriptions() {
			_ = s.Subscribe(uctx, x.UserID, sub.thread, sub.subscriber, sub.uri, true)
		}
	}()
	for subject, fn := range map[string]nats.MsgHandler{s.deps.Names.EventsCatalog(): catalogChanged, s.deps.Names.PersonalEvents(x.UserID): personalChanged, s.deps.Names.InternalMCPPromoted(): promotedHere,
		s.deps.Names.ResourcesUpdated(x.UserID): resourceUpdated} {
		sub, err := s.deps.NC.Subscribe(subject, fn)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subject, err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxStdioLine)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-readErr:
			break loop
		case line := <-lines:
			if len(line) == 0 {
				continue
			}
			m, perr := Parse(line)
			if perr != nil {
				var id json.RawMessage
				if m != nil {
					id = m.ID
				}
				if werr := write(ErrorReply(id, perr)); werr != nil {
					err = werr
					break loop
				}
				continue
			}
			if m.Method == MethodListen && m.IsRequest() {
				// A modern client's notification stream: the
				// acknowledgement, then list_changed (notify) until it
				// cancels it or the stream ends.
				ack, filter, refusal := s.modern.Listen(m)
				if refusal != nil {
					ack = refusal
				}
				var subscriber string
				if refusal == nil && len(filter.ResourceSubscriptions) > 0 {
					// Only the URIs subscribed are acknowledged.
					subscriber = bus.Digest(x.Scope + "\x00" + string(m.ID))
					var ok []string
					for _, uri := range filter.ResourceSubscriptions {
						if !slices.Contains(ok, uri) && s.Subscribe(ctx, x.UserID, x.Thread(), subscriber, uri, false) == nil {
							ok = append(ok, uri)
						}
					}
					filter.ResourceSubscriptions = ok
					ack = ListenAck(m.ID, filter)
				}
				xmu.Lock()
				if refusal == nil && (filter.WantsLists() || len(filter.TaskIDs) > 0 || subscriber != "") {
					l := &stdioListen{id: m.ID, filter: filter, subscriber: subscriber}
					if len(filter.TaskIDs) > 0 {
						l.tasks = s.followTasks(ctx, l.id, x.UserID, x.Thread(), filter.TaskIDs, write)
					}
					listens[string(m.ID)] = l
				}
				werr := write(ack)
				xmu.Unlock()
				if werr != nil {
					err = werr
					break loop
				}
				continue
			}
			if m.Method == "notifications/cancelled" {
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				_ = json.Unmarshal(orEmpty(m.Params), &p)
				xmu.Lock()
				l, isListen := listens[string(p.RequestID)]
				delete(listens, string(p.RequestID))
				xmu.Unlock()
				if isListen {
					l.stop()
					for _, uri := range l.filter.ResourceSubscriptions {
						_ = s.Subscribe(ctx, x.UserID, x.Thread(), l.subscriber, uri, true)
					}
				}
				if isListen {
					continue
				}
			}
			// initialize runs alone so the session it creates is seen by
			// what follows; everything else runs concurrently on a copy.
			if m.Method == "initialize" || m.Method == "logging/setLevel" || m.Method == "resources/subscribe" || m.Method == "resources/unsubscribe" {
				xmu.Lock()
				resp := s.EraOf(m, "").Dispatch(ctx, &x, m)
				xmu.Unlock()
				if resp != nil {
					if werr := write(resp); werr != nil {
						err = werr
						break loop
					}
				}
				continue
			}
			xmu.Lock()
			cx := x
			if x.Session != nil {
				sess := *x.Session
				cx.Session = &sess
			}
			xmu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				if resp := s.EraOf(m, "").Dispatch(ctx, &cx, m); resp != nil {
					_ = write(resp)
				}
			}()
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		// Shutting down: the open subscriptions end gracefully.
		xmu.Lock()
		for _, l := range listens {
			_ = write(s.modern.ListenClosed(l.id))
		}
		xmu.Unlock()
	}
	xmu.Lock()
	defer xmu.Unlock()
	for _, l := range listens {
		l.stop()
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// stdioListen is one open subscriptions/listen on stdio.
type stdioListen struct {
	id json.RawMessage
	// filter is the listen's: the list_changed it gets.
	filter ListenFilter
	// tasks, for a listen naming taskIds, is the subscription to the
	// thread's task events (nil otherwise).
	tasks *nats.Subscription
	// subscriber is the listen's subscriber id for its
	// resourceSubscriptions ("" for none).
	subscriber string
}

// stdioSubscription is one resource subscription of a stdio stream.
type stdioSubscription struct{ subscriber, thread, uri string }

// followTasks subscribes to the task events of userID's thread and writes
// the extension's notifications/tasks for those of ids, on the listen
// opened by the request with id listen; a failed subscription is logged
// and nil (clients poll tasks/get).
func (s *Server) followTasks(ctx context.Context, listen json.RawMessage, userID, thread string, ids []string, write func(*Message) error) *nats.Subscription {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	sub, err := s.deps.NC.Subscribe(s.deps.Names.TaskEvents(thread), func(m *nats.Msg) {
		var ev bus.TaskEventMessage
		if json.Unmarshal(m.Data, &ev) != nil || ev.UserID != userID || !want[ev.TaskID] {
			return
		}
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if build, ok := s.ExtensionTaskStatus(rctx, ev.UserID, ev.ThreadID, ev.TaskID); ok {
				_ = write(build(listen))
			}
		}()
	})
	if err != nil {
		s.log.Warn("task events not subscribed for subscriptions/listen; no notifications/tasks", observability.Err(err))
		return nil
	}
	// The acknowledgement follows: once the client has it, an event of one
	// of its tasks must reach this subscription, so the server must have it.
	if err := s.deps.NC.FlushTimeout(5 * time.Second); err != nil {
		s.log.Warn("task event subscription for subscriptions/listen not confirmed by the NATS server", observability.Err(err))
	}
	return sub
}

// stop ends l's task event subscription.
func (l *stdioListen) stop() {
	if l.tasks != nil {
		_ = l.tasks.Unsubscribe()
	}
}
