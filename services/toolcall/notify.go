package toolcall

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/coalesce"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Upstream notifications other than progress (progress.go):
//
//   - An upstream's notifications/{tools,prompts,resources}/list_changed on
//     any session of this replica (stdio, HTTP, SSE; deployment server or
//     personal connection) becomes a bus.RediscoverRequest on
//     mcpbus.internal.discovery.rediscover, coalesced per (server, owner):
//     at most one per rediscoverEvery, the lists of the notifications in
//     between folded into it. A flooding upstream costs one small publish
//     per interval.
//   - A call with a log_level and a progress_inbox gets the upstream's
//     notifications/message of that call (mcpclient.CallOptions.Owner decides which
//     are the call's) at or above that level on its inbox, with the
//     header Mcpbus-Notification: message, at most maxLogMessages per call
//     (the rest dropped, counted in one debug line at the end).

// rediscoverEvery is the least time between two rediscovery requests this
// replica publishes for one server (and owner).
const rediscoverEvery = 250 * time.Millisecond

// maxLogMessages caps the log messages relayed for one call.
const maxLogMessages = 256

// rediscoverKey is a server and, for a personal connection, its owner.
type rediscoverKey struct{ server, owner string }

// newRediscoverer returns the coalescer that publishes rediscovery
// requests.
func (s *Service) newRediscoverer() *coalesce.Group[rediscoverKey] {
	return coalesce.New(rediscoverEvery, func(_ context.Context, k rediscoverKey, lists []string) {
		body, _ := json.Marshal(bus.RediscoverRequest{Server: k.server, UserID: k.owner, Lists: lists})
		if err := s.deps.NC.Publish(s.deps.Names.InternalRediscover(), body); err != nil {
			s.log.Warn("rediscovery request not published", observability.Server(k.server), observability.Err(err))
			return
		}
		s.log.Info("upstream list changed; rediscovery requested", observability.Server(k.server), "lists", strings.Join(lists, ","))
	})
}

// onListChanged is a session's mcpclient.Spec.OnListChanged: it runs on
// the session's reader goroutine and only triggers the coalescer.
func (s *Service) onListChanged(server, owner string) func(list string) {
	return func(list string) {
		s.rediscover.Trigger(rediscoverKey{server: server, owner: owner}, list)
	}
}

// logTo is the call's mcpclient.LogFunc: it publishes the upstream's log
// messages of the call to inbox (followCall).
func (s *Service) logTo(inbox string) mcpclient.LogFunc {
	var sent, dropped atomic.Int64
	return func(params json.RawMessage) {
		if sent.Add(1) > maxLogMessages {
			if dropped.Add(1) == 1 {
				s.log.Debug("upstream log messages over the per-call cap dropped", "cap", maxLogMessages)
			}
			return
		}
		m := &nats.Msg{Subject: inbox, Data: params, Header: nats.Header{bus.HeaderNotification: []string{bus.NotificationMessage}}}
		if err := s.deps.NC.PublishMsg(m); err != nil {
			s.log.Warn("tool call log message not published", observability.Err(err))
		}
	}
}

// checkLogLevel refuses a log_level that is not one of MCP's levels, or
// one without a progress_inbox to publish to.
func checkLogLevel(level, inbox string) error {
	switch {
	case level == "":
		return nil
	case mcpclient.LogLevelRank(level) < 0:
		return bus.Errorf(bus.CodeInvalidRequest, "log_level: must be one of %s", strings.Join(mcpclient.LogLevels, ", "))
	case inbox == "":
		return bus.Errorf(bus.CodeInvalidRequest, "log_level: needs a progress_inbox to publish the log messages to")
	}
	return nil
}
