package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Progress and cancellation of calls in flight (the contract is in
// pkg/bus/progress.go): a call with a call_id is registered here until it
// returns, so mcpbus.tools.cancel (and, with per-user subjects,
// mcpbus.u.<user>.tools.cancel), which every replica receives, ends it
// on the replica running it (and on the stdio session's owner when it was
// handed over: both register the id). A call with a progress_inbox
// publishes the upstream's notifications/progress params there, from the
// upstream client's reader goroutine, so in order and before the reply.

// errCallCancelled is the cause of a call's context that
// mcpbus.tools.cancel ended.
var errCallCancelled = errors.New("cancelled by the caller (mcpbus.tools.cancel)")

// inFlight is one registered call.
type inFlight struct {
	user   string
	cancel context.CancelCauseFunc
	// next is the next call registered under the same id (a list, not a
	// slice: no allocation per call beyond the entry).
	next *inFlight
}

// callRegistry maps call ids to the calls running here. A cancel that
// finds no call leaves a tombstone for a while, so a call that registers
// just after its cancel arrived (a stdio hand-over still on its way to the
// owner) starts cancelled.
type callRegistry struct {
	mu         sync.Mutex
	calls      map[string]*inFlight
	tombstones map[tombstone]time.Time
	// buried counts the tombstones per user.
	buried map[string]int
}

type tombstone struct{ id, user string }

// Tombstones live tombstoneTTL; at most maxTombstones are kept, and at
// most maxTombstonesPerUser of one user, so an agent worker publishing
// cancels on its own subject (mcpbus.u.<user>.tools.cancel) for calls that
// do not run evicts only its own.
const (
	tombstoneTTL         = time.Minute
	maxTombstones        = 4096
	maxTombstonesPerUser = 64
)

// track registers a call under id (no-op for an empty id) and returns its
// cancellable ctx and the function that unregisters it.
func (r *callRegistry) track(ctx context.Context, id, user string) (context.Context, func()) {
	if id == "" {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	e := &inFlight{user: user, cancel: cancel}
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[string]*inFlight{}
	}
	e.next = r.calls[id]
	r.calls[id] = e
	if at, ok := r.tombstones[tombstone{id, user}]; ok && time.Since(at) < tombstoneTTL {
		cancel(errCallCancelled)
	}
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		if head := r.calls[id]; head == e {
			if e.next == nil {
				delete(r.calls, id)
			} else {
				r.calls[id] = e.next
			}
		} else {
			for x := head; x != nil; x = x.next {
				if x.next == e {
					x.next = e.next
					break
				}
			}
		}
		r.mu.Unlock()
		cancel(nil)
	}
}

// cancel ends the calls registered under id for user; it returns how many.
func (r *callRegistry) cancel(id, user string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for e := r.calls[id]; e != nil; e = e.next {
		if e.user == user {
			e.cancel(errCallCancelled)
			n++
		}
	}
	if n == 0 {
		r.bury(tombstone{id, user})
	}
	return n
}

// bury leaves a tombstone. When the user has maxTombstonesPerUser, that
// user's expired ones are dropped (and, if none had expired, all of the
// user's); when the registry is full, every expired one (and, if none
// had, all).
func (r *callRegistry) bury(t tombstone) {
	now := time.Now()
	if r.tombstones == nil {
		r.tombstones = map[tombstone]time.Time{}
		r.buried = map[string]int{}
	}
	if _, ok := r.tombstones[t]; ok {
		r.tombstones[t] = now
		return
	}
	if r.buried[t.user] >= maxTombstonesPerUser {
		r.sweep(now, func(k tombstone) bool { return k.user == t.user })
	}
	if len(r.tombstones) >= maxTombstones {
		r.sweep(now, func(tombstone) bool { return true })
	}
	r.tombstones[t] = now
	r.buried[t.user]++
}

// sweep drops the expired tombstones that match; if none had expired,
// every one that matches.
func (r *callRegistry) sweep(now time.Time, match func(tombstone) bool) {
	dropped := false
	for k, at := range r.tombstones {
		if match(k) && now.Sub(at) >= tombstoneTTL {
			r.drop(k)
			dropped = true
		}
	}
	if dropped {
		return
	}
	for k := range r.tombstones {
		if match(k) {
			r.drop(k)
		}
	}
}

// drop removes tombstone k.
func (r *callRegistry) drop(k tombstone) {
	delete(r.tombstones, k)
	if r.buried[k.user]--; r.buried[k.user] <= 0 {
		delete(r.buried, k.user)
	}
}

// handleCancel serves mcpbus.tools.cancel.
func (s *Service) handleCancel(m *nats.Msg) {
	req, ok := s.cancelRequest(m)
	if !ok {
		return
	}
	s.cancelCall(req.CallID, req.UserID)
}

// handleUserCancel serves mcpbus.u.<user>.tools.cancel: the user is the
// subject's, and a body naming another user_id does nothing.
func (s *Service) handleUserCancel(m *nats.Msg) {
	user, ok := s.deps.Names.UserOf(m.Subject)
	if !ok {
		s.log.Warn("ignoring a tools cancel request on a subject that names no user")
		return
	}
	req, ok := s.cancelRequest(m)
	if !ok {
		return
	}
	if req.UserID != "" && req.UserID != user {
		s.log.Warn("ignoring a tools cancel request whose user_id is not the user of its subject", "user_id", user)
		return
	}
	s.cancelCall(req.CallID, user)
}

// cancelRequest decodes a tools cancel request (false, logged, when it is
// malformed or names no call).
func (s *Service) cancelRequest(m *nats.Msg) (bus.ToolsCancelRequest, bool) {
	var req bus.ToolsCancelRequest
	if err := json.Unmarshal(m.Data, &req); err != nil || req.CallID == "" {
		s.log.Warn("ignoring a malformed tools cancel request")
		return req, false
	}
	return req, true
}

// cancelCall cancels user's calls registered under id.
func (s *Service) cancelCall(id, user string) {
	if n := s.calls.cancel(id, user); n > 0 {
		s.log.Info("tool call cancelled by its caller", "user_id", user, "calls", n)
	}
}

// callerCancelled reports a call that mcpbus.tools.cancel ended.
func callerCancelled(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errCallCancelled)
}

// cancelledError is the reply to a cancelled call.
func cancelledError(tool string) error {
	return bus.Errorf(bus.CodeCancelled, "tool '%s' was cancelled by the caller", tool)
}

// followCall registers u's call for cancellation (the returned ctx ends
// with a cancel) and, with an inbox, sets u's upstream options to ask for
// progress published there (and, with a log level, for its log messages:
// notify.go). u.userBound says the call came in on its user's per-user
// subject: its inbox must then be under the user's own NATS inbox prefix
// (bus.CheckInbox), else under the deployment's progress prefix. A
// hand-over forwards the call id, inbox and level in the Call itself.
func (s *Service) followCall(ctx context.Context, u *upcall) (context.Context, func(), error) {
	callID, inbox, logLevel, user, userBound := u.call.CallID, u.call.ProgressInbox, u.call.LogLevel, u.call.UserID, u.userBound
	if inbox != "" {
		if err := bus.CheckInbox("progress_inbox", inbox, s.deps.Names.ProgressInboxPrefix(), user, userBound); err != nil {
			return ctx, func() {}, err
		}
	}
	if err := checkLogLevel(logLevel, inbox); err != nil {
		return ctx, func() {}, err
	}
	ctx, untrack := s.calls.track(ctx, callID, user)
	// The upstream's log messages go to this call only while no other
	// user's call is in flight on the session (CallOptions.Owner).
	u.opts.Owner = user
	if logLevel != "" {
		u.opts.LogLevel, u.opts.Log = logLevel, s.logTo(inbox)
	}
	if inbox != "" {
		u.opts.Progress = func(params json.RawMessage) {
			if err := s.deps.NC.Publish(inbox, params); err != nil {
				s.log.Warn("tool call progress not published", observability.Err(err))
			}
		}
	}
	return ctx, untrack, nil
}
