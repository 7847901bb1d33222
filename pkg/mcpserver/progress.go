package mcpserver

import (
	"encoding/json"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Progress, log messages and cancellation across the bus
// (pkg/bus/progress.go): a
// tools/call names a call id derived from the caller's session and the
// request's JSON-RPC id, so the notifications/cancelled naming that id
// cancels the call whichever replica receives it; a call with
// _meta.progressToken, over a transport that can send notifications about
// it (Exchange.Notify), subscribes a progress inbox and relays each
// progress params there to the client with the client's token.

// callID is the bus call id of the request with JSON-RPC id within the
// caller's session or scope, "" without either (nothing could name it in a
// cancellation).
func callID(x *Exchange, id json.RawMessage) string {
	if len(id) == 0 {
		return ""
	}
	if x.Session != nil {
		return bus.CallID(x.UserID, x.Session.ID, id)
	}
	if x.Scope != "" {
		return bus.CallID(x.UserID, "scope:"+x.Scope, id)
	}
	return ""
}

// cancelled handles notifications/cancelled: mcpbus.tools.cancel for the
// call it names (toolcall ignores ids it does not run).
func (s *Server) cancelled(x *Exchange, params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	if json.Unmarshal(orEmpty(params), &p) != nil {
		return
	}
	id := callID(x, p.RequestID)
	if id == "" {
		return
	}
	body, _ := json.Marshal(bus.ToolsCancelRequest{CallID: id, UserID: x.UserID, Reason: p.Reason})
	if err := s.deps.NC.Publish(s.deps.Names.ToolsCancel(), body); err != nil {
		s.log.Warn("tool call cancellation not published", observability.Err(err))
	}
}

// logLevel is the log level a tools/call asks for: a legacy session's
// (logging/setLevel; none until the client sets one: mcpbus forwards no
// log message nobody asked for), a modern request's _meta level.
func logLevel(x *Exchange, metaLevel string) string {
	if x.Session != nil {
		return x.Session.LogLevel
	}
	return metaLevel
}

// startRelay is the relay of a request with the client's progress token
// (absent or null: none) and log level, nil when it asks for neither or
// the transport cannot notify (or the inbox is not subscribed: the
// request then runs without).
func (s *Server) startRelay(x *Exchange, token json.RawMessage, level string) *progressRelay {
	if len(token) == 0 || string(token) == "null" {
		token = nil
	}
	if (token == nil && level == "") || x.Notify == nil {
		return nil
	}
	relay, err := s.newProgressRelay(x, token)
	if err != nil {
		s.log.Warn("progress inbox not subscribed; asking without progress", observability.Err(err))
		return nil
	}
	relay.level = level
	return relay
}

// progressRelay subscribes a fresh progress inbox whose messages become
// notifications/progress with token (and, for a call with a log level,
// notifications/message). Read Inbox for the request; call
// Pump while waiting for the reply and Drain once it came.
type progressRelay struct {
	inbox string
	sub   *nats.Subscription
	msgs  chan *nats.Msg
	token json.RawMessage
	// level is the log level asked for ("" for none).
	level string
	x     *Exchange
}

// progressBuffer bounds the progress a relay holds for its client.
const progressBuffer = 256

func (s *Server) newProgressRelay(x *Exchange, token json.RawMessage) (*progressRelay, error) {
	r := &progressRelay{inbox: s.deps.Names.NewProgressInbox(), msgs: make(chan *nats.Msg, progressBuffer), token: token, x: x}
	sub, err := s.deps.NC.ChanSubscribe(r.inbox, r.msgs)
	if err != nil {
		return nil, err
	}
	r.sub = sub
	return r, nil
}

// send relays one message to the client: a log message (the header
// bus.HeaderNotification) as notifications/message, progress as
// notifications/progress with the client's token (none without one).
func (r *progressRelay) send(m *nats.Msg) {
	if m.Header.Get(bus.HeaderNotification) == bus.NotificationMessage {
		if json.Valid(m.Data) {
			r.x.Notify(&Message{JSONRPC: "2.0", Method: "notifications/message", Params: m.Data})
		}
		return
	}
	if r.token == nil {
		return
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(m.Data, &params) != nil {
		return
	}
	params["progressToken"] = r.token
	r.x.Notify(Notification("notifications/progress", params))
}

// drain relays what arrived before the reply (the toolcall replica
// published it all before replying, and a channel subscription receives
// it in order as the connection reads it) and unsubscribes.
func (r *progressRelay) drain() {
	_ = r.sub.Unsubscribe()
	for {
		select {
		case m := <-r.msgs:
			r.send(m)
		default:
			return
		}
	}
}
