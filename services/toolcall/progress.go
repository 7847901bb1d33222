package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Progress and cancellation of calls in flight (the contract is in
// pkg/bus/progress.go): a call with a call_id is registered here until it
// returns, so mcpbus.tools.cancel, which every replica receives, ends it
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
}

// callRegistry maps call ids to the calls running here. A cancel that
// finds no call leaves a tombstone for a while, so a call that registers
// just after its cancel arrived (a stdio hand-over still on its way to the
// owner) starts cancelled.
type callRegistry struct {
	mu         sync.Mutex
	calls      map[string][]*inFlight
	tombstones map[tombstone]time.Time
}

type tombstone struct{ id, user string }

// Tombstones live tombstoneTTL; at most maxTombstones are kept.
const (
	tombstoneTTL  = time.Minute
	maxTombstones = 4096
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
		r.calls = map[string][]*inFlight{}
	}
	r.calls[id] = append(r.calls[id], e)
	if at, ok := r.tombstones[tombstone{id, user}]; ok && time.Since(at) < tombstoneTTL {
		cancel(errCallCancelled)
	}
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		rest := r.calls[id][:0]
		for _, x := range r.calls[id] {
			if x != e {
				rest = append(rest, x)
			}
		}
		if len(rest) == 0 {
			delete(r.calls, id)
		} else {
			r.calls[id] = rest
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
	for _, e := range r.calls[id] {
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

// bury leaves a tombstone, dropping expired ones (and, when full, all).
func (r *callRegistry) bury(t tombstone) {
	now := time.Now()
	if r.tombstones == nil {
		r.tombstones = map[tombstone]time.Time{}
	}
	if len(r.tombstones) >= maxTombstones {
		for k, at := range r.tombstones {
			if now.Sub(at) >= tombstoneTTL {
				delete(r.tombstones, k)
			}
		}
		if len(r.tombstones) >= maxTombstones {
			clear(r.tombstones)
		}
	}
	r.tombstones[t] = now
}

// handleCancel serves mcpbus.tools.cancel.
func (s *Service) handleCancel(m *nats.Msg) {
	var req bus.ToolsCancelRequest
	if err := json.Unmarshal(m.Data, &req); err != nil || req.CallID == "" {
		s.log.Warn("ignoring a malformed tools cancel request")
		return
	}
	if n := s.calls.cancel(req.CallID, req.UserID); n > 0 {
		s.log.Info("tool call cancelled by its caller", "user_id", req.UserID, "calls", n)
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

// progressInfo is what a call carries for the stdio hand-over: its call id
// and progress inbox.
type progressInfo struct {
	callID, inbox string
}

type progressInfoKey struct{}

// followCall registers a call for cancellation and, with an inbox, asks
// the upstream for progress published there. The returned ctx carries
// both for a hand-over to the stdio session's owner.
func (s *Service) followCall(ctx context.Context, callID, inbox, user string) (context.Context, func(), error) {
	if inbox != "" && !s.deps.Names.ValidProgressInbox(inbox) {
		return ctx, func() {}, bus.Errorf(bus.CodeInvalidRequest, "progress_inbox must be a subject %s<token>", s.deps.Names.ProgressInboxPrefix())
	}
	ctx, untrack := s.calls.track(ctx, callID, user)
	if inbox != "" {
		ctx = mcpclient.WithProgress(ctx, func(params json.RawMessage) {
			if err := s.deps.NC.Publish(inbox, params); err != nil {
				s.log.Warn("tool call progress not published", observability.Err(err))
			}
		})
	}
	if callID != "" || inbox != "" {
		ctx = context.WithValue(ctx, progressInfoKey{}, progressInfo{callID: callID, inbox: inbox})
	}
	return ctx, untrack, nil
}

func progressOf(ctx context.Context) progressInfo {
	p, _ := ctx.Value(progressInfoKey{}).(progressInfo)
	return p
}
